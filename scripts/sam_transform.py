#!/usr/bin/env python3
"""Transform template.yaml (AWS SAM) to CloudFormation offline and check it.

No SAM CLI and no AWS account are needed: this uses the samtranslator python
module, after swapping local CodeUri values for s3://placeholder/... (the
translator wants S3 locations; `sam package` would upload them).

Checks on the generated CloudFormation, each naming the file to fix:
  - the HTTP API has exactly the routes of routes.json, each integrated with
    the function routes.json names (nothing missing, nothing extra): both
    routes.json and the template's HttpApi events are generated from
    shared/api/routes.go (make generate), so this checks the generator's
    output as CloudFormation sees it, and that no hand-written event adds a
    route;
  - exactly the eight functions, provided.al2023, Handler bootstrap, arm64 by
    default, active tracing, JSON logs;
  - each function's environment variables are exactly config-env.json's
    functions[fn] plus sam_only;
  - the outbox function's schedule is rate(1 minute) with {"maxBatch": 500},
    the schedules function's sweep rate(1 minute) with {"fire_schedules": true};
  - the custom IAM policies allow only secretsmanager:GetSecretValue and
    ssm:GetParameter, never on "*", and only publishing functions get the NATS
    credentials policy;
  - schedules (docs/schedules.md): a schedule group; only the schedules
    function may write entries (scheduler:*Schedule on its group's entries
    only) and pass the invoke role (to scheduler.amazonaws.com only); the
    invoke role is assumable by EventBridge Scheduler only and may invoke the
    schedules function only; the function's NOETL_SCHEDULER_* name them;
  - the results bucket is private, encrypted, TLS-only and expires objects;
    exactly the functions config-env.json gives NOETL_RESULT_STORE get it, as
    s3://<bucket>/results, and only they may s3:GetObject, only under results/,
    and s3:PutObject, only under results/noetl/ (results staged through the API);
  - the keychain's KMS key: created with yearly rotation unless one is given,
    and exactly the functions config-env.json gives NOETL_KEYCHAIN_KMS_KEY_ID
    get it and may use it (kms:GenerateDataKey, kms:Decrypt, kms:DescribeKey on
    that key alone; kms:Decrypt alone on previous keys); the created key's
    explicit key policy lets only the keychain function's role use it, the
    account root administer it;
  - throttling: the HTTP API's routes throttled, every function's
    concurrency reserved;
  - an ApiUrl output exists;
  - samconfig.toml's dev and prod deploy settings override only declared
    parameters.

Usage: scripts/sam_transform.py [--template template.yaml] [--out build/template.cfn.json]
"""

import argparse
import copy
import fnmatch
import json
import os
import re
import sys
import tomllib

# samtranslator asks boto3 for the region of the pseudo parameters.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

from cfnlint.decode import cfn_yaml  # noqa: E402  (parses !Ref and friends)
from samtranslator.translator.transform import transform  # noqa: E402

FUNCTIONS = {
    "catalog": "CatalogFunction",
    "execute": "ExecuteFunction",
    "ingest": "IngestFunction",
    "claim": "ClaimFunction",
    "status": "StatusFunction",
    "replay": "ReplayFunction",
    "outbox": "OutboxFunction",
    "schedules": "SchedulesFunction",
    "keychain": "KeychainFunction",
}
PUBLISHERS = {"execute", "ingest", "claim", "status", "outbox", "schedules"}

# Values for parameters without a default, so the translator can resolve them.
PARAMETERS = {
    "DbSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:noetl/check/db-AbCdEf",
}
# A second pass sets every optional parameter: the translator resolves some
# parameter references itself (CORS), so both shapes must transform.
ALL_PARAMETERS = dict(
    PARAMETERS,
    ShardMapParameter="/noetl/check/shard-map",
    ShardSecretArns="arn:aws:secretsmanager:us-east-1:123456789012:secret:noetl/check/s1-AbCdEf",
    ApiTokensSecretArn="arn:aws:secretsmanager:us-east-1:123456789012:secret:noetl/check/tokens-AbCdEf",
    NatsUrl="nats://nats.example.com:4222",
    NatsCredsSecretArn="arn:aws:secretsmanager:us-east-1:123456789012:secret:noetl/check/nats-AbCdEf",
    CorsOrigins="https://a.example.com,https://b.example.com",
    SubnetIds="subnet-1,subnet-2",
    SecurityGroupIds="sg-1",
    KeychainKmsKeyArn="arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555",
    KeychainPreviousKmsKeyArns="arn:aws:kms:us-east-1:123456789012:key/00000000-2222-3333-4444-555555555555",
)


class OfflinePolicyLoader:
    """Stands in for samtranslator's IAM-backed loader: the template must not
    name AWS managed policies by name (that would need IAM at transform time)."""

    def load(self):
        raise RuntimeError("template.yaml names an AWS managed policy by name; use its ARN (the transform runs offline)")


def plain(node):
    """Deep-copy cfn-lint's node types into plain dicts/lists/strings."""
    if isinstance(node, dict):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if isinstance(node, str):
        return str(node)
    return copy.deepcopy(node)


def swap_code_uris(template):
    for name, res in template.get("Resources", {}).items():
        props = res.get("Properties", {})
        if res.get("Type") == "AWS::Serverless::Function" and isinstance(props.get("CodeUri", "."), str):
            if not props.get("CodeUri", ".").startswith("s3://"):
                props["CodeUri"] = f"s3://placeholder/noetl/{name}.zip"
    g = template.get("Globals", {}).get("Function", {})
    if isinstance(g.get("CodeUri"), str) and not g["CodeUri"].startswith("s3://"):
        g["CodeUri"] = "s3://placeholder/noetl/global.zip"


class Checker:
    def __init__(self):
        self.problems = []

    def check(self, ok, msg):
        if not ok:
            self.problems.append(msg)
        return ok


def function_of_uri(uri):
    text = json.dumps(uri)
    m = re.search(r"\$\{(\w+)\.Arn\}", text) or re.search(r'"Fn::GetAtt": \["(\w+)", "Arn"\]', text)
    return m.group(1) if m else None


def check_routes(cfn, routes, c):
    apis = {k: v for k, v in cfn["Resources"].items() if v["Type"] == "AWS::ApiGatewayV2::Api"}
    if not c.check(len(apis) == 1, f"template.yaml: want exactly one HTTP API, found {sorted(apis)}"):
        return
    body = next(iter(apis.values()))["Properties"].get("Body", {})
    got = {}
    for path, methods in body.get("paths", {}).items():
        for method, op in methods.items():
            integ = op.get("x-amazon-apigateway-integration", {})
            got[(method.upper(), path)] = function_of_uri(integ.get("uri"))
    want = {(r["method"], r["path"]): FUNCTIONS.get(r["function"]) for r in routes}
    for key in sorted(want.keys() - got.keys()):
        c.check(False, f"template.yaml: route {key[0]} {key[1]} (routes.json) is missing from {want[key]}: run make generate")
    for key in sorted(got.keys() - want.keys()):
        c.check(False, f"template.yaml: route {key[0]} {key[1]} is not in routes.json: declare routes only in Routes() (shared/api/routes.go), then run make generate")
    for key in sorted(want.keys() & got.keys()):
        c.check(got[key] == want[key], f"template.yaml: route {key[0]} {key[1]} goes to {got[key]}, routes.json says {want[key]}: run make generate")


def check_routes_file(routes, c):
    keys = [(r["path"], r["method"]) for r in routes]
    c.check(keys == sorted(keys), "routes.json: keep it sorted by path, then method")
    c.check(len(set(keys)) == len(keys), "routes.json: a route is listed twice")
    for r in routes:
        c.check(set(r) == {"method", "path", "function"}, f"routes.json: {r} must have exactly method, path, function")
        c.check(r.get("function") in FUNCTIONS, f"routes.json: {r} names an unknown function")
        c.check(r.get("method") in ("GET", "POST", "PUT", "PATCH", "DELETE"), f"routes.json: {r} has an odd method")
        # The API under /api/; the dashboard's page at / and its files under /ui/.
        path = r.get("path", "")
        c.check(path.startswith("/api/") or path == "/" or path.startswith("/ui/"),
                f"routes.json: {r} path must start with /api/ (or be the dashboard's / or /ui/...)")


def check_functions(cfn, params, env_file, c):
    res = cfn["Resources"]
    fns = {k: v for k, v in res.items() if v["Type"] == "AWS::Lambda::Function"}
    c.check(set(fns) == set(FUNCTIONS.values()), f"template.yaml: functions {sorted(fns)}, want {sorted(FUNCTIONS.values())}")
    arch_default = params.get("Architecture", {}).get("Default")
    c.check(arch_default == "arm64", f"template.yaml: Architecture parameter defaults to {arch_default}, want arm64")
    for fn, lid in FUNCTIONS.items():
        f = fns.get(lid)
        if f is None:
            continue
        p = f["Properties"]
        c.check(p.get("Runtime") == "provided.al2023", f"template.yaml: {lid} runtime {p.get('Runtime')}, want provided.al2023")
        c.check(p.get("Handler") == "bootstrap", f"template.yaml: {lid} handler {p.get('Handler')}, want bootstrap")
        c.check(p.get("Architectures") == [{"Ref": "Architecture"}], f"template.yaml: {lid} architectures {p.get('Architectures')}, want [!Ref Architecture]")
        c.check(p.get("TracingConfig") == {"Mode": "Active"}, f"template.yaml: {lid} tracing {p.get('TracingConfig')}, want Active")
        c.check(p.get("LoggingConfig", {}).get("LogFormat") == "JSON", f"template.yaml: {lid} logging {p.get('LoggingConfig')}, want LogFormat JSON")
        got = set(p.get("Environment", {}).get("Variables", {}))
        want = set(env_file["functions"][fn]) | set(env_file["sam_only"])
        c.check(got == want, f"template.yaml: {lid} environment differs from config-env.json functions.{fn} + sam_only: missing {sorted(want - got)}, extra {sorted(got - want)}")


# The per-minute rules: which function each invokes, with what input.
RULES = {"OutboxFunction": {"maxBatch": 500}, "SchedulesFunction": {"fire_schedules": True}}


def check_schedule(cfn, c):
    rules = [v for v in cfn["Resources"].values() if v["Type"] == "AWS::Events::Rule"]
    got = {}
    for r in rules:
        p = r["Properties"]
        c.check(p.get("ScheduleExpression") == "rate(1 minute)", f"template.yaml: schedule {p.get('ScheduleExpression')}, want rate(1 minute)")
        targets = p.get("Targets", [])
        if c.check(len(targets) == 1, f"template.yaml: schedule targets {targets}, want one function"):
            got[function_of_uri(targets[0].get("Arn"))] = json.loads(targets[0].get("Input", "null"))
    c.check(got == RULES, f"template.yaml: per-minute rules invoke {got}, want {RULES}")


SCHEDULER_ACTIONS = {"scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule", "scheduler:GetSchedule"}


def check_scheduler(cfn, c):
    res = cfn["Resources"]
    groups = [k for k, v in res.items() if v["Type"] == "AWS::Scheduler::ScheduleGroup"]
    if not c.check(groups == ["ScheduleGroup"], f"template.yaml: schedule groups {groups}, want ScheduleGroup"):
        return
    entries = res.get("SchedulerEntriesPolicy")
    if c.check(entries is not None, "template.yaml: no SchedulerEntriesPolicy"):
        by_sid = {st.get("Sid"): st for st in entries["Properties"]["PolicyDocument"]["Statement"]}
        write, pass_ = by_sid.get("WriteScheduleEntries", {}), by_sid.get("PassInvokeRole", {})
        c.check(set(write.get("Action", [])) == SCHEDULER_ACTIONS, f"template.yaml: SchedulerEntriesPolicy writes {write.get('Action')}, want {sorted(SCHEDULER_ACTIONS)}")
        c.check("schedule/${ScheduleGroup}/*" in json.dumps(write.get("Resource")), f"template.yaml: SchedulerEntriesPolicy writes {write.get('Resource')}, want only the group's entries")
        c.check(pass_.get("Action") == "iam:PassRole" and pass_.get("Resource") == {"Fn::GetAtt": ["SchedulerInvokeRole", "Arn"]},
                f"template.yaml: SchedulerEntriesPolicy passes {pass_}, want iam:PassRole on SchedulerInvokeRole only")
        c.check(pass_.get("Condition", {}).get("StringEquals", {}).get("iam:PassedToService") == "scheduler.amazonaws.com",
                "template.yaml: PassInvokeRole must be conditioned on iam:PassedToService scheduler.amazonaws.com")
    for fn, lid in FUNCTIONS.items():
        role = res.get(f"{lid}Role")
        if role is None:
            continue
        attached = "SchedulerEntriesPolicy" in json.dumps(role["Properties"].get("ManagedPolicyArns", []))
        c.check(attached == (fn == "schedules"), f"template.yaml: {lid} SchedulerEntriesPolicy attached = {attached}, want {fn == 'schedules'}")
    role = res.get("SchedulerInvokeRole", {}).get("Properties", {})
    trust = role.get("AssumeRolePolicyDocument", {}).get("Statement", [])
    c.check(len(trust) == 1 and trust[0].get("Principal") == {"Service": "scheduler.amazonaws.com"},
            f"template.yaml: SchedulerInvokeRole trusts {trust}, want EventBridge Scheduler only")
    c.check(not role.get("Policies") and role.get("ManagedPolicyArns") == [{"Ref": "SchedulerInvokePolicy"}],
            "template.yaml: SchedulerInvokeRole must hold exactly SchedulerInvokePolicy")
    inv = res.get("SchedulerInvokePolicy", {}).get("Properties", {}).get("PolicyDocument", {}).get("Statement", [])
    c.check(len(inv) == 1 and inv[0].get("Action") == "lambda:InvokeFunction" and "function:noetl-${Stage}-schedules" in json.dumps(inv[0].get("Resource")),
            f"template.yaml: SchedulerInvokePolicy {inv}, want lambda:InvokeFunction on the schedules function only")
    env = res.get("SchedulesFunction", {}).get("Properties", {}).get("Environment", {}).get("Variables", {})
    c.check(env.get("NOETL_SCHEDULER_GROUP") == {"Ref": "ScheduleGroup"}, f"template.yaml: NOETL_SCHEDULER_GROUP is {env.get('NOETL_SCHEDULER_GROUP')}")
    c.check(env.get("NOETL_SCHEDULER_ROLE_ARN") == {"Fn::GetAtt": ["SchedulerInvokeRole", "Arn"]}, f"template.yaml: NOETL_SCHEDULER_ROLE_ARN is {env.get('NOETL_SCHEDULER_ROLE_ARN')}")
    c.check("function:noetl-${Stage}-schedules" in json.dumps(env.get("NOETL_SCHEDULER_TARGET_ARN")), f"template.yaml: NOETL_SCHEDULER_TARGET_ARN is {env.get('NOETL_SCHEDULER_TARGET_ARN')}")


# The results bucket's policy allows only s3 actions on it, the keychain
# key's only KMS actions on it; no other policy allows either.
RESULTS_POLICY = "ResultsReadPolicy"
RESULTS_BUCKET = "ResultsBucket"
RESULTS_PREFIX = "results"
KEYCHAIN_POLICY = "KeychainKeyPolicy"
KEYCHAIN_KEY = "KeychainKey"
KEYCHAIN_ENV = "NOETL_KEYCHAIN_KMS_KEY_ID"
POLICY_ACTIONS = {
    RESULTS_POLICY: ("s3:GetObject", "s3:PutObject"),
    KEYCHAIN_POLICY: ("kms:GenerateDataKey", "kms:Decrypt", "kms:DescribeKey"),
    "SchedulerEntriesPolicy": tuple(SCHEDULER_ACTIONS) + ("iam:PassRole",),
    "SchedulerInvokePolicy": ("lambda:InvokeFunction",),
}


def statements(doc):
    """The policy's statements, the conditional ones (Fn::If) resolved both ways."""
    out = []
    for st in doc.get("Statement", []):
        if isinstance(st, dict) and "Fn::If" in st:
            out += [x for x in st["Fn::If"][1:] if isinstance(x, dict) and "Effect" in x]
        else:
            out.append(st)
    return out


def actions(st):
    a = st.get("Action", [])
    return [a] if isinstance(a, str) else list(a)


def check_policies(cfn, c):
    res = cfn["Resources"]
    for name, r in res.items():
        if r["Type"] != "AWS::IAM::ManagedPolicy":
            continue
        doc = r["Properties"]["PolicyDocument"]
        text = json.dumps(doc)
        allowed = POLICY_ACTIONS.get(name, ("secretsmanager:GetSecretValue", "ssm:GetParameter"))
        for st in statements(doc):
            for action in actions(st):
                c.check(action in allowed, f"template.yaml: {name} allows {action}: only {', '.join(allowed)} is needed")
        c.check('"Resource": "*"' not in text and '"*"' not in text, f"template.yaml: {name} grants on '*': name the ARNs")
    for fn, lid in FUNCTIONS.items():
        role = res.get(f"{lid}Role")
        if not c.check(role is not None, f"template.yaml: {lid} has no generated role {lid}Role"):
            continue
        arns = json.dumps(role["Properties"].get("ManagedPolicyArns", []))
        c.check("ConfigReadPolicy" in arns, f"template.yaml: {lid} lacks ConfigReadPolicy")
        c.check(("NatsCredsReadPolicy" in arns) == (fn in PUBLISHERS),
                f"template.yaml: {lid} NATS credentials policy attached = {'NatsCredsReadPolicy' in arns}, want {fn in PUBLISHERS}")
        c.check(not role["Properties"].get("Policies"), f"template.yaml: {lid} has inline policies; use the managed ones")


def check_keychain(cfn, env_file, c):
    """The keychain key is the stack's (rotated yearly) unless KeychainKmsKeyArn
    names one, and exactly the functions config-env.json gives
    NOETL_KEYCHAIN_KMS_KEY_ID (the keychain function) hold it and may use it."""
    res = cfn["Resources"]
    users = {fn for fn, names in env_file["functions"].items() if KEYCHAIN_ENV in names}
    c.check(users == {"keychain"}, f"config-env.json: {KEYCHAIN_ENV} is listed for {sorted(users)}, want only keychain")
    cond = cfn.get("Conditions", {}).get("CreateKeychainKey")
    c.check(cond == {"Fn::Equals": [{"Ref": "KeychainKmsKeyArn"}, ""]}, f"template.yaml: CreateKeychainKey is {cond}, want KeychainKmsKeyArn == ''")
    key = res.get(KEYCHAIN_KEY)
    if not c.check(key is not None and key["Type"] == "AWS::KMS::Key" and key.get("Condition") == "CreateKeychainKey",
                   f"template.yaml: no {KEYCHAIN_KEY} (AWS::KMS::Key, Condition CreateKeychainKey)"):
        return
    c.check(key["Properties"].get("EnableKeyRotation") is True, f"template.yaml: {KEYCHAIN_KEY} must rotate its key material (EnableKeyRotation: true)")
    want_arn = {"Fn::If": ["CreateKeychainKey", {"Fn::GetAtt": [KEYCHAIN_KEY, "Arn"]}, {"Ref": "KeychainKmsKeyArn"}]}
    for fn, lid in FUNCTIONS.items():
        f, role = res.get(lid), res.get(f"{lid}Role")
        if f is None or role is None:
            continue
        got = f["Properties"].get("Environment", {}).get("Variables", {}).get(KEYCHAIN_ENV)
        if fn in users:
            c.check(got == want_arn, f"template.yaml: {lid} {KEYCHAIN_ENV} is {got}, want {want_arn}")
        attached = KEYCHAIN_POLICY in json.dumps(role["Properties"].get("ManagedPolicyArns", []))
        c.check(attached == (fn in users), f"template.yaml: {lid} {KEYCHAIN_POLICY} attached = {attached}, want {fn in users} (only the keychain function uses the key)")
    pol = res.get(KEYCHAIN_POLICY)
    if not c.check(pol is not None, f"template.yaml: no {KEYCHAIN_POLICY}"):
        return
    # The IAM policy names a key given by ARN only; the stack's own key
    # grants the function in its key policy (check_key_policy).
    stmts = statements(pol["Properties"]["PolicyDocument"])
    use = [s for s in stmts if "kms:GenerateDataKey" in actions(s)]
    c.check(len(use) == 1 and use[0].get("Resource") == {"Ref": "KeychainKmsKeyArn"} and set(actions(use[0])) == {"kms:GenerateDataKey", "kms:Decrypt", "kms:DescribeKey"},
            f"template.yaml: {KEYCHAIN_POLICY} must allow kms:GenerateDataKey, kms:Decrypt and kms:DescribeKey on KeychainKmsKeyArn only: {stmts}")
    check_key_policy(key, c)
    for s in stmts:
        if s not in use:
            c.check(actions(s) == ["kms:Decrypt"] and s.get("Resource") == {"Ref": "KeychainPreviousKmsKeyArns"},
                    f"template.yaml: {KEYCHAIN_POLICY}'s other statements may only kms:Decrypt under KeychainPreviousKmsKeyArns: {s}")


# What uses a key's material; the account may administer the key, not use it.
KMS_USE = ("kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:GenerateDataKey",
           "kms:GenerateDataKeyWithoutPlaintext", "kms:GenerateDataKeyPair", "kms:GenerateDataKeyPairWithoutPlaintext")


def grants_use(action):
    """Whether an action pattern (kms:*, kms:Re*, ...) covers a use of the key."""
    return any(fnmatch.fnmatchcase(u, action) for u in KMS_USE)


def check_key_policy(key, c):
    """Issue 33's finding 10: an explicit key policy in which only the keychain
    function's role may use the key and the account root keeps
    administration (AWS's default key policy lets any principal of the
    account whose IAM policies allow kms:Decrypt on * use it)."""
    kp = key["Properties"].get("KeyPolicy")
    if not c.check(isinstance(kp, dict), f"template.yaml: {KEYCHAIN_KEY} has no explicit KeyPolicy"):
        return
    users, admins = [], []
    for st in kp.get("Statement", []):
        principal = st.get("Principal", {}).get("AWS") if isinstance(st.get("Principal"), dict) else st.get("Principal")
        uses = [a for a in actions(st) if grants_use(a)]
        c.check(st.get("Effect") == "Allow" and "Condition" not in st, f"template.yaml: {KEYCHAIN_KEY} key policy statement {st.get('Sid')}: want a plain Allow")
        if uses:
            users.append((principal, sorted(actions(st))))
        elif "root" in json.dumps(principal):
            admins.append(st)
    c.check(users == [({"Fn::GetAtt": ["KeychainFunctionRole", "Arn"]}, ["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"])],
            f"template.yaml: {KEYCHAIN_KEY}'s key policy lets {users} use the key; want only the keychain function's role (KeychainFunctionRole)")
    c.check(len(admins) == 1 and any(fnmatch.fnmatchcase("kms:PutKeyPolicy", a) for a in actions(admins[0])),
            f"template.yaml: {KEYCHAIN_KEY}'s key policy must keep the account root as its administrator (kms:PutKeyPolicy), so the key cannot be locked out")


def check_throttling(cfn, c):
    """Issue 33's finding 10: every route throttled, every function's
    concurrency reserved (bounded), so requests without a token cost a
    bounded rate of invocations."""
    res = cfn["Resources"]
    stages = [r for r in res.values() if r["Type"] == "AWS::ApiGatewayV2::Stage"]
    drs = stages[0]["Properties"].get("DefaultRouteSettings", {}) if len(stages) == 1 else {}
    c.check(drs.get("ThrottlingRateLimit") == {"Ref": "ApiThrottleRateLimit"} and drs.get("ThrottlingBurstLimit") == {"Ref": "ApiThrottleBurstLimit"},
            f"template.yaml: the HTTP API's stage throttles routes at {drs}, want ApiThrottleRateLimit and ApiThrottleBurstLimit")
    want = {"Fn::If": ["HasReservedConcurrency", {"Ref": "FunctionReservedConcurrency"}, {"Ref": "AWS::NoValue"}]}
    for fn, lid in FUNCTIONS.items():
        got = res.get(lid, {}).get("Properties", {}).get("ReservedConcurrentExecutions")
        c.check(got == want, f"template.yaml: {lid} ReservedConcurrentExecutions is {got}, want FunctionReservedConcurrency")


def check_results(cfn, env_file, c):
    res = cfn["Resources"]
    bucket = res.get(RESULTS_BUCKET)
    if not c.check(bucket is not None and bucket["Type"] == "AWS::S3::Bucket", f"template.yaml: no {RESULTS_BUCKET} (AWS::S3::Bucket)"):
        return
    p = bucket["Properties"]
    sse = p.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
    c.check(any(r.get("ServerSideEncryptionByDefault", {}).get("SSEAlgorithm") in ("AES256", "aws:kms") for r in sse),
            f"template.yaml: {RESULTS_BUCKET} has no default encryption: {sse}")
    block = p.get("PublicAccessBlockConfiguration", {})
    for k in ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"):
        c.check(block.get(k) is True, f"template.yaml: {RESULTS_BUCKET} PublicAccessBlockConfiguration.{k} is {block.get(k)}, want true")
    rules = p.get("LifecycleConfiguration", {}).get("Rules", [])
    c.check(any(r.get("Status") == "Enabled" and r.get("ExpirationInDays") and not r.get("Prefix") and not r.get("Filter") for r in rules),
            f"template.yaml: {RESULTS_BUCKET} needs an enabled lifecycle rule expiring every object: {rules}")
    tls = [r for r in res.values() if r["Type"] == "AWS::S3::BucketPolicy" and r["Properties"].get("Bucket") == {"Ref": RESULTS_BUCKET}]
    c.check(len(tls) == 1 and "aws:SecureTransport" in json.dumps(tls), f"template.yaml: {RESULTS_BUCKET} needs a bucket policy denying requests without TLS")

    readers = {fn for fn, names in env_file["functions"].items() if "NOETL_RESULT_STORE" in names}
    c.check(readers == {"ingest"}, f"config-env.json: NOETL_RESULT_STORE is listed for {sorted(readers)}, want only ingest")
    want_url = {"Fn::Sub": f"s3://${{{RESULTS_BUCKET}}}/{RESULTS_PREFIX}"}
    for fn, lid in FUNCTIONS.items():
        f = res.get(lid)
        role = res.get(f"{lid}Role")
        if f is None or role is None:
            continue
        url = f["Properties"].get("Environment", {}).get("Variables", {}).get("NOETL_RESULT_STORE")
        if fn in readers:
            c.check(url == want_url, f"template.yaml: {lid} NOETL_RESULT_STORE is {url}, want {want_url}")
        attached = RESULTS_POLICY in json.dumps(role["Properties"].get("ManagedPolicyArns", []))
        c.check(attached == (fn in readers), f"template.yaml: {lid} {RESULTS_POLICY} attached = {attached}, want {fn in readers} (only functions reading NOETL_RESULT_STORE)")
    pol = res.get(RESULTS_POLICY)
    if c.check(pol is not None, f"template.yaml: no {RESULTS_POLICY}"):
        stmts = pol["Properties"]["PolicyDocument"]["Statement"]
        want = [{"Sid": "ReadStoredResults", "Effect": "Allow", "Action": "s3:GetObject", "Resource": {"Fn::Sub": f"${{{RESULTS_BUCKET}.Arn}}/{RESULTS_PREFIX}/*"}},
                {"Sid": "StageResults", "Effect": "Allow", "Action": "s3:PutObject", "Resource": {"Fn::Sub": f"${{{RESULTS_BUCKET}.Arn}}/{RESULTS_PREFIX}/noetl/*"}}]
        c.check(stmts == want, f"template.yaml: {RESULTS_POLICY} statements {stmts}, want {want}")
    outputs = cfn.get("Outputs", {})
    c.check(outputs.get("ResultsBucketName", {}).get("Value") == {"Ref": RESULTS_BUCKET}, "template.yaml: the ResultsBucketName output (workers need the bucket) is missing")


def check_samconfig(path, params, c):
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    for env in ("dev", "prod"):
        dep = cfg.get(env, {}).get("deploy", {}).get("parameters", {})
        if not c.check(dep, f"{path}: no [{env}.deploy.parameters]"):
            continue
        c.check(dep.get("stack_name") == f"noetl-{env}", f"{path}: {env} stack_name {dep.get('stack_name')}, want noetl-{env}")
        c.check("CAPABILITY_IAM" in dep.get("capabilities", ""), f"{path}: {env} needs capabilities CAPABILITY_IAM (the template creates roles)")
        for kv in dep.get("parameter_overrides", "").split():
            key, _, value = kv.partition("=")
            c.check(key in params, f"{path}: {env} overrides {key}, which template.yaml does not declare")
            c.check(key != "Stage" or value == env, f"{path}: {env} overrides Stage={value}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--template", default="template.yaml")
    ap.add_argument("--routes", default="routes.json")
    ap.add_argument("--config-env", default="config-env.json")
    ap.add_argument("--samconfig", default="samconfig.toml")
    ap.add_argument("--out", default="build/template.cfn.json")
    args = ap.parse_args()

    sam = plain(cfn_yaml.load(args.template))
    swap_code_uris(sam)
    cfn = transform(sam, dict(PARAMETERS), OfflinePolicyLoader())
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(cfn, f, indent=1, sort_keys=True)

    with open(args.routes) as f:
        routes = json.load(f)
    with open(args.config_env) as f:
        env_file = json.load(f)
    c = Checker()
    check_routes_file(routes, c)
    check_routes(cfn, routes, c)
    check_functions(cfn, sam.get("Parameters", {}), env_file, c)
    check_schedule(cfn, c)
    check_scheduler(cfn, c)
    check_policies(cfn, c)
    check_results(cfn, env_file, c)
    check_keychain(cfn, env_file, c)
    check_throttling(cfn, c)
    check_samconfig(args.samconfig, sam.get("Parameters", {}), c)
    c.check("ApiUrl" in cfn.get("Outputs", {}), "template.yaml: the ApiUrl output is missing")

    sam2 = plain(cfn_yaml.load(args.template))
    swap_code_uris(sam2)
    cfn2 = transform(sam2, dict(ALL_PARAMETERS), OfflinePolicyLoader())
    cors = json.dumps(cfn2["Resources"]["HttpApi"]["Properties"]["Body"].get("x-amazon-apigateway-cors"))
    c.check(ALL_PARAMETERS["CorsOrigins"] in cors, f"template.yaml: with CorsOrigins set the HTTP API's CORS is {cors}")
    check_keychain(cfn2, env_file, c)

    counts = {}
    for r in cfn["Resources"].values():
        counts[r["Type"]] = counts.get(r["Type"], 0) + 1
    print(f"{args.template} -> {args.out}: {len(cfn['Resources'])} resources; " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if c.problems:
        for p in c.problems:
            print("FAIL " + p, file=sys.stderr)
        sys.exit(1)
    print(f"ok: {len(routes)} routes, {len(FUNCTIONS)} functions, schedules, environment, policies, the results bucket and the keychain key match routes.json and config-env.json")


if __name__ == "__main__":
    main()
