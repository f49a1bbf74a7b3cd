package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestMain stops the jsii kernel (a node process) after the tests. The node
// 20 end-of-life banner is silenced by JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
// in the environment (make infra-test sets it; setting it here is too late).
func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// dummyAssets writes a fake bootstrap per function so tests need no build.
func dummyAssets(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range Functions() {
		if err := os.MkdirAll(filepath.Join(dir, f.Name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name, "bootstrap"), []byte("#!/bin/sh\necho "+f.Name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func testConfig(t *testing.T, shards int) Config {
	return Config{
		Stage: "test", Shards: shards, AssetDir: dummyAssets(t),
		RoutesFile: "../routes.json", ConfigEnvFile: "../config-env.json",
		LogLevel: "info", MinACU: 0.5, MaxACU: 4, OutboxLagAlarmS: 300, ResultRetentionDays: 30,
		ApiThrottleRate: 200, ApiThrottleBurst: 400, ReservedConcurrency: 25,
	}
}

// tpl is a synthesized CloudFormation template as plain JSON values.
type tpl struct {
	Resources map[string]resource `json:"Resources"`
	Outputs   map[string]any      `json:"Outputs"`
}

type resource struct {
	Type                string         `json:"Type"`
	Properties          map[string]any `json:"Properties"`
	DeletionPolicy      string         `json:"DeletionPolicy"`
	UpdateReplacePolicy string         `json:"UpdateReplacePolicy"`
}

func synth(t *testing.T, c Config) tpl {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack, err := NewStack(app, "noetl-test", nil, c)
	if err != nil {
		t.Fatalf("NewStack: %v", err)
	}
	raw := assertions.Template_FromStack(stack, nil).ToJSON()
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var out tpl
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (x tpl) ofType(typ string) map[string]resource {
	out := map[string]resource{}
	for id, r := range x.Resources {
		if r.Type == typ {
			out[id] = r
		}
	}
	return out
}

func (x tpl) count(typ string) int { return len(x.ofType(typ)) }

// ref describes an intrinsic as "Ref:X" or "GetAtt:X.Attr" (or JSON otherwise).
func ref(v any) string {
	if m, ok := v.(map[string]any); ok {
		if r, ok := m["Ref"].(string); ok {
			return "Ref:" + r
		}
		if g, ok := m["Fn::GetAtt"].([]any); ok && len(g) == 2 {
			return fmt.Sprintf("GetAtt:%v.%v", g[0], g[1])
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// flatten renders an Fn::Join of literals and intrinsics as one string, with
// intrinsics written <<Ref:X>> / <<GetAtt:X.Y>>.
func flatten(t *testing.T, v any) string {
	t.Helper()
	if s, ok := v.(string); ok {
		return s
	}
	j, ok := v.(map[string]any)["Fn::Join"].([]any)
	if !ok || len(j) != 2 {
		t.Fatalf("not a string or Fn::Join: %s", ref(v))
	}
	var b strings.Builder
	for i, part := range j[1].([]any) {
		if i > 0 {
			b.WriteString(j[0].(string))
		}
		if s, ok := part.(string); ok {
			b.WriteString(s)
		} else {
			b.WriteString("<<" + ref(part) + ">>")
		}
	}
	return b.String()
}

func readRoutes(t *testing.T) []Route {
	t.Helper()
	r, err := ReadRoutes("../routes.json")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readEnv(t *testing.T) *EnvFile {
	t.Helper()
	e, err := ReadEnvFile("../config-env.json")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestStack synthesizes once per shard count and checks the template.
func TestStack(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("shards=%d", n), func(t *testing.T) {
			x := synth(t, testConfig(t, n))
			t.Run("Counts", func(t *testing.T) { checkCounts(t, x, n) })
			t.Run("ShardMap", func(t *testing.T) { checkShardMap(t, x, n) })
			t.Run("ProxyAccess", func(t *testing.T) { checkProxyAccess(t, x, n) })
			if n != 2 {
				return // the rest does not depend on the shard count
			}
			t.Run("Routes", func(t *testing.T) { checkRoutes(t, x) })
			t.Run("Functions", func(t *testing.T) { checkFunctions(t, x) })
			t.Run("Schedule", func(t *testing.T) { checkSchedule(t, x) })
			t.Run("Scheduler", func(t *testing.T) { checkScheduler(t, x) })
			t.Run("Alarms", func(t *testing.T) { checkAlarms(t, x) })
			t.Run("Permissions", func(t *testing.T) { checkPermissions(t, x, n, "", "") })
			t.Run("ResultsBucket", func(t *testing.T) { checkResultsBucket(t, x, 30) })
		})
	}
}

func checkCounts(t *testing.T, x tpl, n int) {
	want := map[string]int{
		"AWS::RDS::DBCluster":            n,
		"AWS::RDS::DBInstance":           n, // one serverless v2 writer each
		"AWS::RDS::DBProxy":              n,
		"AWS::RDS::DBProxyTargetGroup":   n,
		"AWS::SecretsManager::Secret":    n + 1, // one per cluster + API tokens
		"AWS::SSM::Parameter":            1,
		"AWS::Lambda::Function":          9,
		"AWS::ApiGatewayV2::Api":         1,
		"AWS::ApiGatewayV2::Route":       len(readRoutes(t)),
		"AWS::ApiGatewayV2::Integration": 9,
		"AWS::Events::Rule":              2, // the outbox drain, the schedules' sweep
		"AWS::CloudWatch::Alarm":         10,
		"AWS::Scheduler::ScheduleGroup":  1,
		"AWS::EC2::VPC":                  1,
		"AWS::EC2::NatGateway":           1,
		"AWS::EC2::VPCEndpoint":          1,     // S3 gateway: stored results skip the NAT
		"AWS::EC2::SecurityGroupIngress": 2 * n, // functions -> proxy, proxy -> cluster
		"AWS::Logs::LogGroup":            9,
		"AWS::S3::Bucket":                1, // results stored by reference
		"AWS::S3::BucketPolicy":          1, // TLS only
		"AWS::KMS::Key":                  1, // the keychain's
		"AWS::KMS::Alias":                1,
	}
	for typ, c := range want {
		if got := x.count(typ); got != c {
			t.Errorf("%s: %d, want %d", typ, got, c)
		}
	}
}

func proxies(t *testing.T, x tpl, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		var found []string
		for id := range x.ofType("AWS::RDS::DBProxy") {
			if strings.HasPrefix(id, fmt.Sprintf("Shard%dClusterProxy", i)) {
				found = append(found, id)
			}
		}
		if len(found) != 1 {
			t.Fatalf("shard %d: proxies %v, want one", i, found)
		}
		ids = append(ids, found[0])
	}
	return ids
}

func checkShardMap(t *testing.T, x tpl, n int) {
	var param resource
	for _, r := range x.ofType("AWS::SSM::Parameter") {
		param = r
	}
	if name := param.Properties["Name"]; name != "/noetl/test/shard-map" {
		t.Errorf("parameter name %v", name)
	}
	text := flatten(t, param.Properties["Value"])
	// Tokens become strings so the value parses as the JSON the functions read.
	var m struct {
		Cluster map[string]any   `json:"cluster"`
		Shards  []map[string]any `json:"shards"`
	}
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("shard map is not JSON: %v\n%s", err, text)
	}
	px := proxies(t, x, n)
	if len(m.Shards) != n {
		t.Fatalf("shard map has %d shards, want %d", len(m.Shards), n)
	}
	for i, s := range append([]map[string]any{m.Cluster}, m.Shards...) {
		want := px[0] // the cluster database lives on shard 0
		if i > 0 {
			want = px[i-1]
		}
		if s["host"] != "<<GetAtt:"+want+".Endpoint>>" || s["port"] != float64(5432) || s["dbname"] != "noetl" {
			t.Errorf("entry %d = %v, want host %s endpoint, port 5432, dbname noetl", i, s, want)
		}
		arn, _ := s["secret_arn"].(string)
		wantSecret := 0
		if i > 0 {
			wantSecret = i - 1
		}
		if !regexp.MustCompile(fmt.Sprintf(`^<<Ref:Shard%dClusterSecretAttachment`, wantSecret)).MatchString(arn) {
			t.Errorf("entry %d secret_arn %q, want shard %d's secret", i, arn, wantSecret)
		}
		if len(s) != 4 {
			t.Errorf("entry %d has keys %v, want exactly host, port, dbname, secret_arn (shared/config rejects unknown keys)", i, s)
		}
	}
}

func checkProxyAccess(t *testing.T, x tpl, n int) {
	px := proxies(t, x, n)
	sgOfProxy := map[string]string{}
	names := map[any]bool{}
	for i, id := range px {
		name := x.Resources[id].Properties["DBProxyName"]
		if want := fmt.Sprintf("noetl-test-shard%d", i); name != want || names[name] {
			t.Errorf("%s: DBProxyName %v, want %s (unique per account and region)", id, name, want)
		}
		names[name] = true
		sgs := x.Resources[id].Properties["VpcSecurityGroupIds"].([]any)
		sgOfProxy[ref(sgs[0])] = id
		if x.Resources[id].Properties["RequireTLS"] != true {
			t.Errorf("%s does not require TLS (the functions use sslmode=require)", id)
		}
	}
	allowed := map[string]bool{}
	for _, r := range x.ofType("AWS::EC2::SecurityGroupIngress") {
		p := r.Properties
		if ref(p["SourceSecurityGroupId"]) == "GetAtt:FunctionsSecurityGroup"+suffix(x, "FunctionsSecurityGroup")+".GroupId" &&
			p["FromPort"] == float64(5432) && p["ToPort"] == float64(5432) {
			if id, ok := sgOfProxy[ref(p["GroupId"])]; ok {
				allowed[id] = true
			}
		}
	}
	for _, id := range px {
		if !allowed[id] {
			t.Errorf("functions may not reach %s on 5432", id)
		}
	}
}

// suffix returns the hash CDK appended to a construct's logical id.
func suffix(x tpl, prefix string) string {
	for id := range x.Resources {
		if strings.HasPrefix(id, prefix) && len(id) == len(prefix)+8 {
			return id[len(prefix):]
		}
	}
	return ""
}

func checkRoutes(t *testing.T, x tpl) {
	integrationFn := map[string]string{} // integration logical id -> function logical id
	for id, r := range x.ofType("AWS::ApiGatewayV2::Integration") {
		if r.Properties["IntegrationType"] != "AWS_PROXY" || r.Properties["PayloadFormatVersion"] != "2.0" {
			t.Errorf("%s: %v %v, want AWS_PROXY 2.0", id, r.Properties["IntegrationType"], r.Properties["PayloadFormatVersion"])
		}
		integrationFn[id] = strings.TrimSuffix(strings.TrimPrefix(ref(r.Properties["IntegrationUri"]), "GetAtt:"), ".Arn")
	}
	got := map[string]string{}
	for _, r := range x.ofType("AWS::ApiGatewayV2::Route") {
		key := r.Properties["RouteKey"].(string)
		target := flatten(t, r.Properties["Target"])
		integ := strings.TrimSuffix(strings.TrimPrefix(target, "integrations/<<Ref:"), ">>")
		if _, dup := got[key]; dup {
			t.Errorf("route %s defined twice", key)
		}
		got[key] = integrationFn[integ]
	}
	want := map[string]string{}
	ids := map[string]string{}
	for _, f := range Functions() {
		ids[f.Name] = f.LogicalID
	}
	for _, r := range readRoutes(t) {
		want[r.Method+" "+r.Path] = ids[r.Function]
	}
	for key, fn := range want {
		if got[key] != fn {
			t.Errorf("route %s -> %q, want %s (routes.json)", key, got[key], fn)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("route %s is not in routes.json", key)
		}
	}
}

func checkFunctions(t *testing.T, x tpl) {
	env := readEnv(t)
	fns := x.ofType("AWS::Lambda::Function")
	for _, f := range Functions() {
		r, ok := fns[f.LogicalID]
		if !ok {
			t.Errorf("no function with logical id %s (template.yaml uses the same ids)", f.LogicalID)
			continue
		}
		p := r.Properties
		if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" {
			t.Errorf("%s: runtime %v handler %v", f.LogicalID, p["Runtime"], p["Handler"])
		}
		if !slices.Equal(toStrings(p["Architectures"]), []string{"arm64"}) {
			t.Errorf("%s: architectures %v, want [arm64]", f.LogicalID, p["Architectures"])
		}
		if ref(p["TracingConfig"]) != `{"Mode":"Active"}` {
			t.Errorf("%s: tracing %v", f.LogicalID, p["TracingConfig"])
		}
		if lc, _ := p["LoggingConfig"].(map[string]any); lc["LogFormat"] != "JSON" {
			t.Errorf("%s: logging %v, want LogFormat JSON", f.LogicalID, p["LoggingConfig"])
		}
		if p["VpcConfig"] == nil {
			t.Errorf("%s: not in the VPC (RDS Proxy is only reachable inside it)", f.LogicalID)
		}
		if want := float64(f.TimeoutSeconds); p["Timeout"] != want {
			t.Errorf("%s: timeout %v, want %v", f.LogicalID, p["Timeout"], want)
		}
		vars, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		var names []string
		for k := range vars {
			names = append(names, k)
		}
		sort.Strings(names)
		if !slices.Equal(names, env.Functions[f.Name]) {
			t.Errorf("%s: environment %q, want config-env.json functions.%s %q", f.LogicalID, names, f.Name, env.Functions[f.Name])
		}
		// Spot-check the values that wire the function to the stack.
		if !strings.HasPrefix(ref(vars["NOETL_DB_SECRET_ARN"]), "Ref:Shard0ClusterSecretAttachment") {
			t.Errorf("%s: NOETL_DB_SECRET_ARN = %s, want shard 0's secret", f.LogicalID, ref(vars["NOETL_DB_SECRET_ARN"]))
		}
		if !strings.HasPrefix(ref(vars["NOETL_SHARD_MAP_PARAM"]), "Ref:ShardMap") {
			t.Errorf("%s: NOETL_SHARD_MAP_PARAM = %s", f.LogicalID, ref(vars["NOETL_SHARD_MAP_PARAM"]))
		}
		if vars["NOETL_STAGE"] != "test" || vars["NOETL_ALLOW_OPEN"] != "false" || vars["NOETL_DB_SSLMODE"] != "require" {
			t.Errorf("%s: stage %v allow_open %v sslmode %v", f.LogicalID, vars["NOETL_STAGE"], vars["NOETL_ALLOW_OPEN"], vars["NOETL_DB_SSLMODE"])
		}
		if su, ok := vars["NOETL_SERVER_URL"]; ok && !strings.HasPrefix(ref(su), "GetAtt:HttpApi") {
			t.Errorf("%s: NOETL_SERVER_URL = %s, want the HTTP API's URL", f.LogicalID, ref(su))
		}
		if rs, ok := vars["NOETL_RESULT_STORE"]; ok {
			want := "s3://<<Ref:" + resultsBucket(t, x) + ">>/" + ResultsPrefix
			if got := flatten(t, rs); got != want {
				t.Errorf("%s: NOETL_RESULT_STORE = %s, want %s", f.LogicalID, got, want)
			}
		}
	}
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// rules maps each per-minute rule's target to its input.
var rules = map[string]map[string]any{
	"GetAtt:OutboxFunction.Arn":    {"maxBatch": float64(500)},
	"GetAtt:SchedulesFunction.Arn": {"fire_schedules": true},
}

func checkSchedule(t *testing.T, x tpl) {
	seen := map[string]bool{}
	for id, r := range x.ofType("AWS::Events::Rule") {
		p := r.Properties
		if p["ScheduleExpression"] != "rate(1 minute)" {
			t.Errorf("%s: schedule %v, want rate(1 minute)", id, p["ScheduleExpression"])
		}
		targets := p["Targets"].([]any)
		if len(targets) != 1 {
			t.Fatalf("%s: %d targets", id, len(targets))
		}
		tg := targets[0].(map[string]any)
		want, ok := rules[ref(tg["Arn"])]
		if !ok {
			t.Errorf("%s: target %s, want the outbox or the schedules function", id, ref(tg["Arn"]))
			continue
		}
		seen[ref(tg["Arn"])] = true
		var in map[string]any
		if err := json.Unmarshal([]byte(tg["Input"].(string)), &in); err != nil || !maps.Equal(in, want) {
			t.Errorf("%s: input %v, want %v", id, tg["Input"], want)
		}
	}
	for fn := range rules {
		if !seen[fn] {
			t.Errorf("no per-minute rule invokes %s", fn)
		}
		// EventBridge may invoke it.
		ok := false
		for _, r := range x.ofType("AWS::Lambda::Permission") {
			if r.Properties["Principal"] == "events.amazonaws.com" && ref(r.Properties["FunctionName"]) == fn {
				ok = true
			}
		}
		if !ok {
			t.Errorf("no permission for EventBridge to invoke %s", fn)
		}
	}
}

// checkScheduler: the schedules' EventBridge Scheduler group, the role the
// scheduler assumes (trusting only the scheduler, invoking only the
// schedules function), and the schedules function's environment naming them.
func checkScheduler(t *testing.T, x tpl) {
	groups := x.ofType("AWS::Scheduler::ScheduleGroup")
	var group string
	for id, r := range groups {
		group = id
		if r.Properties["Name"] != "noetl-test" {
			t.Errorf("%s: name %v, want noetl-test", id, r.Properties["Name"])
		}
	}
	var role string
	for id, r := range x.ofType("AWS::IAM::Role") {
		if strings.HasPrefix(id, "SchedulerInvokeRole") {
			role = id
			trust := ref(r.Properties["AssumeRolePolicyDocument"])
			if !strings.Contains(trust, `"Service":"scheduler.amazonaws.com"`) || !strings.Contains(trust, `"aws:SourceAccount"`) {
				t.Errorf("%s trusts %s, want EventBridge Scheduler of this account only", id, trust)
			}
		}
	}
	if role == "" {
		t.Fatal("no SchedulerInvokeRole")
	}
	for id, r := range x.ofType("AWS::IAM::Policy") {
		if !strings.HasPrefix(id, "SchedulerInvokeRoleDefaultPolicy") {
			continue
		}
		doc := ref(r.Properties["PolicyDocument"])
		if !strings.Contains(doc, `"Action":"lambda:InvokeFunction"`) || !strings.Contains(doc, ":function:noetl-test-schedules") || strings.Count(doc, `"Action"`) != 1 {
			t.Errorf("%s: %s, want lambda:InvokeFunction on the schedules function only", id, doc)
		}
	}
	fn := x.ofType("AWS::Lambda::Function")["SchedulesFunction"].Properties
	if fn["FunctionName"] != "noetl-test-schedules" {
		t.Errorf("SchedulesFunction name %v, want noetl-test-schedules (the entries and the invoke role name it)", fn["FunctionName"])
	}
	vars := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
	if ref(vars["NOETL_SCHEDULER_GROUP"]) != "Ref:"+group || ref(vars["NOETL_SCHEDULER_ROLE_ARN"]) != "GetAtt:"+role+".Arn" ||
		!strings.HasSuffix(flatten(t, vars["NOETL_SCHEDULER_TARGET_ARN"]), ":function:noetl-test-schedules") {
		t.Errorf("SchedulesFunction scheduler settings %s %s %s", ref(vars["NOETL_SCHEDULER_GROUP"]), ref(vars["NOETL_SCHEDULER_ROLE_ARN"]),
			ref(vars["NOETL_SCHEDULER_TARGET_ARN"]))
	}
	// Its own policy: entries of its group only, the invoke role passed to
	// the scheduler only.
	p := policyText(x, "SchedulesFunction")
	for _, want := range []string{`"scheduler:CreateSchedule"`, `"scheduler:UpdateSchedule"`, `"scheduler:DeleteSchedule"`,
		`:schedule/noetl-test/*"`, `"Action":"iam:PassRole"`, `"iam:PassedToService":"scheduler.amazonaws.com"`, `"Fn::GetAtt":["` + role + `","Arn"]`} {
		if !strings.Contains(p, want) {
			t.Errorf("SchedulesFunction policy lacks %s: %s", want, p)
		}
	}
	if out, _ := x.Outputs["ScheduleGroupName"].(map[string]any); ref(out["Value"]) != "Ref:"+group {
		t.Errorf("output ScheduleGroupName = %v", out)
	}
}

func checkAlarms(t *testing.T, x tpl) {
	errorsOf := map[string]bool{}
	lag := 0
	for id, r := range x.ofType("AWS::CloudWatch::Alarm") {
		p := r.Properties
		switch p["MetricName"] {
		case "Errors":
			dims := p["Dimensions"].([]any)
			d := dims[0].(map[string]any)
			if p["Namespace"] != "AWS/Lambda" || d["Name"] != "FunctionName" {
				t.Errorf("%s: %v %v", id, p["Namespace"], d)
			}
			errorsOf[ref(d["Value"])] = true
		case OutboxLagMetric:
			lag++
			dims := p["Dimensions"].([]any)
			if p["Namespace"] != MetricNamespace || len(dims) != 1 || ref(dims[0]) != `{"Name":"Stage","Value":"test"}` {
				t.Errorf("%s: namespace %v dimensions %v, want NoETL / Stage=test (the EMF contract)", id, p["Namespace"], dims)
			}
			if p["TreatMissingData"] != "breaching" || p["Threshold"] != float64(300) {
				t.Errorf("%s: missing data %v threshold %v", id, p["TreatMissingData"], p["Threshold"])
			}
		default:
			t.Errorf("%s: unexpected alarm on %v", id, p["MetricName"])
		}
	}
	for _, f := range Functions() {
		if !errorsOf["Ref:"+f.LogicalID] {
			t.Errorf("no Errors alarm for %s", f.LogicalID)
		}
	}
	if lag != 1 {
		t.Errorf("%d outbox lag alarms, want 1", lag)
	}
}

// policyText gathers the statements of the default policy of a function's role.
func policyText(x tpl, fn string) string {
	var b strings.Builder
	for id, r := range x.ofType("AWS::IAM::Policy") {
		if strings.HasPrefix(id, fn+"ServiceRoleDefaultPolicy") {
			j, _ := json.Marshal(r.Properties["PolicyDocument"])
			b.Write(j)
		}
	}
	return b.String()
}

func checkPermissions(t *testing.T, x tpl, n int, tokensArn, natsArn string) {
	checkPermissionsWith(t, x, n, tokensArn, natsArn, "", nil)
}

// checkPermissionsWith is checkPermissions for a stack given an existing
// keychain key (keyArn, previous: decrypt only); keyArn "" is the stack's own.
func checkPermissionsWith(t *testing.T, x tpl, n int, tokensArn, natsArn, keyArn string, previous []string) {
	for _, f := range Functions() {
		p := policyText(x, f.LogicalID)
		var doc struct {
			Statement []struct {
				Sid      string
				Action   any
				Resource any
			}
		}
		if err := json.Unmarshal([]byte(p), &doc); err != nil {
			t.Fatalf("%s: policy %q: %v", f.LogicalID, p, err)
		}
		var secrets, params, objects, staged, kmsUse, kmsDecrypt []string
		for _, st := range doc.Statement {
			res, _ := st.Resource.([]any)
			if res == nil {
				res = []any{st.Resource}
			}
			var rs []string
			for _, r := range res {
				rs = append(rs, ref(r))
			}
			switch fmt.Sprint(st.Action) {
			case "secretsmanager:GetSecretValue":
				secrets = append(secrets, rs...)
			case "ssm:GetParameter":
				params = append(params, rs...)
			case "s3:GetObject":
				for _, r := range res {
					objects = append(objects, flatten(t, r))
				}
			case "s3:PutObject":
				for _, r := range res {
					staged = append(staged, flatten(t, r))
				}
			case "[kms:GenerateDataKey kms:Decrypt kms:DescribeKey]":
				kmsUse = append(kmsUse, rs...)
			case "kms:Decrypt":
				kmsDecrypt = append(kmsDecrypt, rs...)
			case "[xray:PutTraceSegments xray:PutTelemetryRecords]":
			case "[scheduler:CreateSchedule scheduler:UpdateSchedule scheduler:DeleteSchedule scheduler:GetSchedule]", "iam:PassRole":
				if f.Name != "schedules" {
					t.Errorf("%s: %v: only the schedules function writes scheduler entries", f.LogicalID, st.Action)
				}
			default:
				t.Errorf("%s: unexpected action %v on %v (only GetSecretValue and GetParameter are needed)", f.LogicalID, st.Action, rs)
			}
		}
		want := []string{}
		for i := range n {
			want = append(want, fmt.Sprintf("Ref:Shard%dClusterSecretAttachment", i))
		}
		if tokensArn != "" {
			want = append(want, `"`+tokensArn+`"`)
		} else {
			want = append(want, "Ref:ApiTokens")
		}
		if natsArn != "" && readEnv(t).Uses(f.Name, "NOETL_NATS_CREDS_SECRET_ARN") {
			want = append(want, `"`+natsArn+`"`)
		}
		if len(secrets) != len(want) {
			t.Errorf("%s may read secrets %v, want exactly %v", f.LogicalID, secrets, want)
		}
		for _, w := range want {
			if !slices.ContainsFunc(secrets, func(s string) bool { return strings.HasPrefix(s, w) }) {
				t.Errorf("%s may not read %s (it reads %v)", f.LogicalID, w, secrets)
			}
		}
		if len(params) != 1 || !strings.Contains(params[0], `"Ref":"ShardMap`) {
			t.Errorf("%s: ssm:GetParameter on %v, want exactly the shard map", f.LogicalID, params)
		}
		// Only the functions that read NOETL_RESULT_STORE (ingest) may read
		// stored results, and only under the prefix.
		wantObjects := []string{}
		if readEnv(t).Uses(f.Name, "NOETL_RESULT_STORE") {
			wantObjects = append(wantObjects, "<<GetAtt:"+resultsBucket(t, x)+".Arn>>/"+ResultsPrefix+"/*")
		}
		if !slices.Equal(append([]string{}, objects...), wantObjects) {
			t.Errorf("%s: s3:GetObject on %q, want %q", f.LogicalID, objects, wantObjects)
		}
		// It writes only the results NoETL's workers stage through it.
		wantStaged := []string{}
		if readEnv(t).Uses(f.Name, "NOETL_RESULT_STORE") {
			wantStaged = append(wantStaged, "<<GetAtt:"+resultsBucket(t, x)+".Arn>>/"+ResultsPrefix+"/noetl/*")
		}
		if !slices.Equal(append([]string{}, staged...), wantStaged) {
			t.Errorf("%s: s3:PutObject on %q, want %q", f.LogicalID, staged, wantStaged)
		}
		// Exactly the functions given NOETL_KEYCHAIN_KMS_KEY_ID (keychain) may
		// use the keychain's key, that key alone; previous keys decrypt only.
		wantUse, wantDecrypt := []string{}, []string{}
		if readEnv(t).Uses(f.Name, "NOETL_KEYCHAIN_KMS_KEY_ID") {
			if keyArn != "" {
				wantUse = append(wantUse, `"`+keyArn+`"`)
			} else {
				wantUse = append(wantUse, "GetAtt:KeychainKey.Arn")
			}
			for _, p := range previous {
				wantDecrypt = append(wantDecrypt, `"`+p+`"`)
			}
		}
		if !slices.Equal(append([]string{}, kmsUse...), wantUse) || !slices.Equal(append([]string{}, kmsDecrypt...), wantDecrypt) {
			t.Errorf("%s: KMS use on %q and decrypt on %q, want %q and %q", f.LogicalID, kmsUse, kmsDecrypt, wantUse, wantDecrypt)
		}
	}
}

// TestKeychainKey: the stack's keychain key rotates yearly, is retained and
// aliased, and is what the keychain function is told to use; an existing key
// is used instead of creating one, with previous keys decrypt only. KMS is
// granted to exactly the keychain function (checkPermissionsWith).
func TestKeychainKey(t *testing.T) {
	x := synth(t, testConfig(t, 1))
	keys := x.ofType("AWS::KMS::Key")
	k, ok := keys["KeychainKey"]
	if len(keys) != 1 || !ok {
		t.Fatalf("KMS keys %v, want KeychainKey", keys)
	}
	if k.Properties["EnableKeyRotation"] != true || k.DeletionPolicy != "Retain" {
		t.Errorf("KeychainKey: rotation %v, deletion %q; want rotation on and Retain (it opens every credential)", k.Properties["EnableKeyRotation"], k.DeletionPolicy)
	}
	for _, a := range x.ofType("AWS::KMS::Alias") {
		if a.Properties["AliasName"] != "alias/noetl-test-keychain" || ref(a.Properties["TargetKeyId"]) != "GetAtt:KeychainKey.Arn" {
			t.Errorf("alias %v -> %v", a.Properties["AliasName"], ref(a.Properties["TargetKeyId"]))
		}
	}
	for _, f := range Functions() {
		env, _ := x.Resources[f.LogicalID].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		got, has := env["NOETL_KEYCHAIN_KMS_KEY_ID"]
		if has != (f.Name == "keychain") {
			t.Errorf("%s: NOETL_KEYCHAIN_KMS_KEY_ID set = %v, want only on keychain", f.LogicalID, has)
		}
		if has && ref(got) != "GetAtt:KeychainKey.Arn" {
			t.Errorf("%s: NOETL_KEYCHAIN_KMS_KEY_ID = %s", f.LogicalID, ref(got))
		}
	}
	if out, _ := x.Outputs["KeychainKeyArn"].(map[string]any); ref(out["Value"]) != "GetAtt:KeychainKey.Arn" {
		t.Errorf("output KeychainKeyArn = %v", out)
	}
	checkPermissionsWith(t, x, 1, "", "", "", nil)
	checkKeyPolicy(t, x, k)

	c := testConfig(t, 1)
	c.KeychainKeyArn = "arn:aws:kms:eu-west-1:123456789012:key/11111111-2222-3333-4444-555555555555"
	c.KeychainPreviousKeyArns = []string{"arn:aws:kms:eu-west-1:123456789012:key/00000000-2222-3333-4444-555555555555"}
	x = synth(t, c)
	if n := x.count("AWS::KMS::Key"); n != 0 {
		t.Errorf("%d keys created for an existing key", n)
	}
	env := x.Resources["KeychainFunction"].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	if env["NOETL_KEYCHAIN_KMS_KEY_ID"] != c.KeychainKeyArn {
		t.Errorf("keychain env %v", env)
	}
	checkPermissionsWith(t, x, 1, "", "", c.KeychainKeyArn, c.KeychainPreviousKeyArns)
}

// kmsUse are the KMS actions that use a key's material.
var kmsUse = []string{"kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:GenerateDataKey",
	"kms:GenerateDataKeyWithoutPlaintext", "kms:GenerateDataKeyPair", "kms:GenerateDataKeyPairWithoutPlaintext"}

// grantsUse reports whether an action pattern (kms:*, kms:Re*, …) covers a use of the key.
func grantsUse(action string) bool {
	for _, u := range kmsUse {
		if ok, _ := path.Match(action, u); ok {
			return true
		}
	}
	return false
}

// checkKeyPolicy is issue 33's finding 10: the keychain key has an explicit
// key policy in which only the keychain function's role may use the key and
// the account root keeps administration (AWS's default key policy lets any
// principal of the account whose IAM policies allow kms:Decrypt use it).
func checkKeyPolicy(t *testing.T, x tpl, k resource) {
	t.Helper()
	doc, _ := k.Properties["KeyPolicy"].(map[string]any)
	stmts, _ := doc["Statement"].([]any)
	role := ref(x.Resources["KeychainFunction"].Properties["Role"])
	var users, admins []string
	for _, raw := range stmts {
		st := raw.(map[string]any)
		principal := ref(st["Principal"].(map[string]any)["AWS"])
		acts, _ := st["Action"].([]any)
		if a, ok := st["Action"].(string); ok {
			acts = []any{a}
		}
		var use, all []string
		for _, a := range acts {
			all = append(all, a.(string))
			if grantsUse(a.(string)) {
				use = append(use, a.(string))
			}
		}
		if st["Effect"] != "Allow" || st["Condition"] != nil {
			t.Errorf("key policy statement %v: want a plain Allow", st["Sid"])
		}
		switch {
		case len(use) > 0:
			slices.Sort(all)
			users = append(users, principal+" "+strings.Join(all, ","))
		case strings.Contains(principal, ":root"):
			for _, a := range all {
				if ok, _ := path.Match(a, "kms:PutKeyPolicy"); ok {
					admins = append(admins, principal)
				}
			}
		}
	}
	want := []string{role + " kms:Decrypt,kms:DescribeKey,kms:GenerateDataKey"}
	if !slices.Equal(users, want) || !strings.HasPrefix(role, "GetAtt:KeychainFunction") {
		t.Errorf("the keychain key's policy lets %q use it; want only the keychain function's role: %q", users, want)
	}
	if len(admins) != 1 {
		t.Errorf("the keychain key's policy: %d statements keep the account root its administrator (kms:PutKeyPolicy), want 1", len(admins))
	}
}

// TestThrottling is issue 33's finding 10: every route of the HTTP API is
// throttled and every function's concurrency is reserved, so requests
// without a token (which still invoke a function) cost a bounded rate.
func TestThrottling(t *testing.T) {
	x := synth(t, testConfig(t, 1))
	stages := x.ofType("AWS::ApiGatewayV2::Stage")
	if len(stages) != 1 {
		t.Fatalf("%d stages, want the default one", len(stages))
	}
	for id, st := range stages {
		drs, _ := st.Properties["DefaultRouteSettings"].(map[string]any)
		if drs["ThrottlingRateLimit"] != float64(200) || drs["ThrottlingBurstLimit"] != float64(400) {
			t.Errorf("%s: DefaultRouteSettings %v, want a rate limit of 200/s and a burst of 400", id, drs)
		}
	}
	for _, f := range Functions() {
		if got := x.Resources[f.LogicalID].Properties["ReservedConcurrentExecutions"]; got != float64(25) {
			t.Errorf("%s: ReservedConcurrentExecutions %v, want 25", f.LogicalID, got)
		}
	}
	c := testConfig(t, 1)
	c.ReservedConcurrency = 0
	x = synth(t, c)
	if got, has := x.Resources["KeychainFunction"].Properties["ReservedConcurrentExecutions"]; has {
		t.Errorf("reservedConcurrency=0: ReservedConcurrentExecutions %v, want none", got)
	}
}

// resultsBucket returns the results bucket's logical id.
func resultsBucket(t *testing.T, x tpl) string {
	t.Helper()
	b := x.ofType("AWS::S3::Bucket")
	if len(b) != 1 {
		t.Fatalf("buckets %v, want only the results bucket", b)
	}
	for id := range b {
		if !strings.HasPrefix(id, "ResultsBucket") {
			t.Fatalf("bucket %s, want ResultsBucket…", id)
		}
		return id
	}
	return ""
}

// checkResultsBucket: private, encrypted, TLS only, expiring, retained, and
// named in the outputs (workers need it).
func checkResultsBucket(t *testing.T, x tpl, days int) {
	id := resultsBucket(t, x)
	b := x.Resources[id]
	p := b.Properties
	if b.DeletionPolicy != "Retain" || b.UpdateReplacePolicy != "Retain" {
		t.Errorf("%s: deletion %q replace %q, want Retain (results are data)", id, b.DeletionPolicy, b.UpdateReplacePolicy)
	}
	if enc := ref(p["BucketEncryption"]); !strings.Contains(enc, `"SSEAlgorithm":"AES256"`) {
		t.Errorf("%s: encryption %s, want SSE-S3 (no KMS grant needed for workers)", id, enc)
	}
	block, _ := p["PublicAccessBlockConfiguration"].(map[string]any)
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if block[k] != true {
			t.Errorf("%s: PublicAccessBlockConfiguration.%s = %v, want true", id, k, block[k])
		}
	}
	rules, _ := p["LifecycleConfiguration"].(map[string]any)["Rules"].([]any)
	expires := false
	for _, r := range rules {
		r := r.(map[string]any)
		if r["Status"] == "Enabled" && r["ExpirationInDays"] == float64(days) && r["Prefix"] == nil && r["Filter"] == nil {
			expires = true
		}
	}
	if !expires {
		t.Errorf("%s: lifecycle %v, want every object to expire after %d days", id, rules, days)
	}
	tls := false
	for _, r := range x.ofType("AWS::S3::BucketPolicy") {
		if ref(r.Properties["Bucket"]) == "Ref:"+id && strings.Contains(ref(r.Properties["PolicyDocument"]), `"aws:SecureTransport":"false"`) {
			tls = true
		}
	}
	if !tls {
		t.Errorf("%s: no bucket policy denying requests without TLS", id)
	}
	out, _ := x.Outputs["ResultsBucketName"].(map[string]any)
	if ref(out["Value"]) != "Ref:"+id {
		t.Errorf("output ResultsBucketName = %v, want the results bucket", out)
	}
	url, _ := x.Outputs["ResultStoreUrl"].(map[string]any)
	if got, want := flatten(t, url["Value"]), "s3://<<Ref:"+id+">>/"+ResultsPrefix; got != want {
		t.Errorf("output ResultStoreUrl = %s, want %s", got, want)
	}
}

// TestCfnLint runs cfn-lint on the synthesized template: it knows service
// rules the CDK does not check at synth (unique names, property values).
func TestCfnLint(t *testing.T) {
	bin, err := exec.LookPath("cfn-lint")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cfn-lint is not on PATH and CI is set: %v", err)
		}
		t.Skip("cfn-lint is not on PATH (pip install cfn-lint)")
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack, err := NewStack(app, "noetl-test", nil, testConfig(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(assertions.Template_FromStack(stack, nil).ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "noetl-test.template.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Warnings are style (CDK adds explicit DependsOn that cfn-lint calls redundant).
	if out, err := exec.Command(bin, "--ignore-checks", "W", "--", path).CombinedOutput(); err != nil {
		t.Errorf("cfn-lint: %v\n%s", err, out)
	}
}

// TestExternalSecrets: existing tokens and NATS creds secrets are used, not
// created, and only publishing functions may read the NATS creds.
func TestExternalSecrets(t *testing.T) {
	c := testConfig(t, 1)
	c.ApiTokensSecretArn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:noetl/test/tokens-AbCdEf"
	c.NatsCredsSecretArn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:noetl/test/nats-AbCdEf"
	c.NatsURL = "nats://nats.example.com:4222"
	c.CorsOrigins = []string{"https://app.example.com"}
	c.ResultRetentionDays = 7
	x := synth(t, c)
	checkResultsBucket(t, x, 7)
	if got := x.count("AWS::SecretsManager::Secret"); got != 1 {
		t.Errorf("%d secrets created, want only the cluster's", got)
	}
	checkPermissions(t, x, 1, c.ApiTokensSecretArn, c.NatsCredsSecretArn)
	ingest := x.Resources["IngestFunction"].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	if ingest["NOETL_NATS_URL"] != c.NatsURL || ingest["NOETL_API_TOKENS_SECRET_ARN"] != c.ApiTokensSecretArn || ingest["NOETL_CORS_ORIGINS"] != "https://app.example.com" {
		t.Errorf("ingest env %v", ingest)
	}
	for _, r := range x.ofType("AWS::ApiGatewayV2::Api") {
		if cors := ref(r.Properties["CorsConfiguration"]); !strings.Contains(cors, "https://app.example.com") {
			t.Errorf("API CORS %s", cors)
		}
	}
}

func TestConfigFromContext(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"shards": "3", "stage": "prod", "corsOrigins": "https://a, https://b", "maxAcu": 16, "migrateOnStart": "true"}})
	c, err := ConfigFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	if c.Shards != 3 || c.Stage != "prod" || c.MaxACU != 16 || !c.MigrateOnStart || !slices.Equal(c.CorsOrigins, []string{"https://a", "https://b"}) || c.AssetDir != "../build" {
		t.Errorf("config %+v", c)
	}
	c, err = ConfigFromContext(awscdk.NewApp(nil).Node())
	if err != nil || c.Shards != 2 || c.Stage != "dev" || c.MinACU != 0.5 || c.ResultRetentionDays != 30 {
		t.Errorf("defaults %+v %v", c, err)
	}
	for in, want := range map[any]int{"7": 7, 90.0: 90} {
		app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"resultRetentionDays": in}})
		if c, err := ConfigFromContext(app.Node()); err != nil || c.ResultRetentionDays != want {
			t.Errorf("resultRetentionDays=%v: %d %v, want %d", in, c.ResultRetentionDays, err, want)
		}
	}
	for _, bad := range []any{"0", "-1", "x", "3651", 1.5} {
		app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"resultRetentionDays": bad}})
		if _, err := ConfigFromContext(app.Node()); err == nil || !strings.Contains(err.Error(), "resultRetentionDays") {
			t.Errorf("resultRetentionDays=%v: %v", bad, err)
		}
	}
	for _, bad := range []string{"Prod", "my stage", "1dev", ""} {
		app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"stage": bad}})
		if _, err := ConfigFromContext(app.Node()); (err == nil) != (bad == "") {
			t.Errorf("stage=%q: %v", bad, err)
		}
	}
	if _, err := ConfigFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"migrateOnStart": "yes"}}).Node()); err == nil {
		t.Error("migrateOnStart=yes accepted")
	}
	for _, bad := range []any{"0", "x", "1025", 2.5} {
		app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"shards": bad}})
		if _, err := ConfigFromContext(app.Node()); err == nil || !strings.Contains(err.Error(), "shards") {
			t.Errorf("shards=%v: %v", bad, err)
		}
	}
}

func TestNewStackErrors(t *testing.T) {
	c := testConfig(t, 1)
	c.AssetDir = t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	if _, err := NewStack(app, "a", nil, c); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("missing bootstraps: %v", err)
	}

	c = testConfig(t, 1)
	dir := t.TempDir()
	env := readEnv(t)
	env.Functions["status"] = append(slices.Clone(env.Functions["status"]), "NOETL_SOMETHING_NEW")
	b, _ := json.Marshal(env)
	c.ConfigEnvFile = filepath.Join(dir, "config-env.json")
	os.WriteFile(c.ConfigEnvFile, b, 0o644)
	if _, err := NewStack(app, "b", nil, c); err == nil || !strings.Contains(err.Error(), "NOETL_SOMETHING_NEW") {
		t.Errorf("unknown env name: %v", err)
	}

	c = testConfig(t, 1)
	c.RoutesFile = filepath.Join(dir, "routes.json")
	os.WriteFile(c.RoutesFile, []byte(`[{"method":"GET","path":"/api/x","function":"nope"}]`), 0o644)
	if _, err := NewStack(app, "c", nil, c); err == nil || !strings.Contains(err.Error(), `unknown function "nope"`) {
		t.Errorf("bad routes: %v", err)
	}
}

// TestRoutesFile guards routes.json's shape (the lead will generate it from
// the Go router later).
func TestRoutesFile(t *testing.T) {
	routes := readRoutes(t)
	if len(routes) == 0 {
		t.Fatal("no routes")
	}
	sorted := slices.IsSortedFunc(routes, func(a, b Route) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Method, b.Method)
	})
	if !sorted {
		t.Error("routes.json: keep it sorted by path, then method")
	}
	used := map[string]bool{}
	for _, r := range routes {
		used[r.Function] = true
		if r.Path == "/metrics" {
			t.Error("/metrics is served by the local server only")
		}
	}
	for _, f := range Functions() {
		if !used[f.Name] {
			t.Errorf("no route reaches %s", f.Name)
		}
	}
}
