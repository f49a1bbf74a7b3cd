package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/wire"
)

// `noetl credentials <subcommand>`: the keychain from the shell. Data is read
// from a file or stdin, never taken as a flag value (any user can read a
// process's arguments).

func runCredentials(ctx context.Context, _ *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	return subcommandGroup{name: "credentials",
		doc: "Manage the keychain: credentials playbooks name with auth: <name>, sealed at rest (README, \"Credentials\").\n" +
			"Workers read a credential's data for the execution they run; users never get it back.",
		cmds: []subcommand{
			{"set", command{summary: "create or replace a credential (its data from a file or stdin)", client: runCredentialSet}},
			{"list", command{summary: "list credentials (never their data)", client: runCredentialList}},
			{"get", command{summary: "show a credential's metadata", client: runCredentialGet}},
			{"delete", command{summary: "delete a credential", client: runCredentialDelete}},
			{"reads", command{summary: "who read a credential, for which execution, and what was answered", client: runCredentialReads}},
			{"rotate", command{summary: "reseal every credential under the keychain's current key (--new-key: a new key first)", client: runCredentialRotate}},
		}}.run(ctx, args, stdout, stderr)
}

// nameArg reads the one positional credential name (or id).
func nameArg(fs *flag.FlagSet, stderr io.Writer) (string, bool) {
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		fmt.Fprintln(stderr, "give exactly one credential name")
		fs.Usage()
		return "", false
	}
	return fs.Arg(0), true
}

// readDoc reads JSON or YAML from a file, or stdin for "-".
func readDoc(path string, stdin io.Reader) (map[string]any, error) {
	var src []byte
	var err error
	if path == "-" {
		src, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
	} else {
		src, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := yaml.Unmarshal(src, &v); err != nil {
		return nil, fmt.Errorf("%s: not a JSON or YAML object: %w", path, err)
	}
	// Through JSON into jsonx's values (yaml.v3 gives ints, JSON gives int64).
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return jsonx.DecodeObject(b)
}

// readRequest reads a request from a JSON or YAML file (stdin for "-") into
// v, a wire type: a key v has no field for is an error listing fields.
func readRequest(path string, stdin io.Reader, v any, fields string) error {
	doc, err := readDoc(path, stdin)
	if err != nil {
		return err
	}
	b, err := jsonx.Marshal(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w (fields: %s)", path, err, fields)
	}
	return nil
}

func runCredentialSet(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	file := fs.String("f", "", "a credential file in NoETL's shape {name, type, data, tags, description, meta} and our scope (JSON or YAML; - for stdin)")
	typ := fs.String("type", "", "postgres, bearer, api_key, basic, http, generic, … (default generic)")
	data := fs.String("data", "", "a JSON or YAML file holding the credential's data object (- for stdin)")
	tags := fs.String("tags", "", "comma-separated tags")
	desc := fs.String("description", "", "what the credential is for")
	playbooks := fs.String("allow-playbooks", "", "comma-separated playbook path globs whose executions may use it (scope.playbooks; * in a segment, ** across)")
	pools := fs.String("allow-pools", "", "comma-separated pools whose executions may use it (scope.pools)")
	hosts := fs.String("allow-hosts", "", "comma-separated hosts the worker may send it to: host, host:port or *.domain (scope.hosts)")
	if code, ok := parseFlags(fs, args, "credentials set NAME [flags]  |  credentials set -f FILE",
		"Creates or replaces a credential. Its data comes from --data FILE (or -f FILE in NoETL's credential shape);\n"+
			"- reads stdin. The server seals it before storing it. --allow-* set its scope (docs/security.md);\n"+
			"without them a replace keeps the stored scope.\n\n"+
			"  noetl credentials set pg_prod --type postgres --data pg.json --allow-playbooks 'finance/**' --allow-hosts db.internal\n"+
			"  echo '{\"token\": \"…\"}' | noetl credentials set github --type bearer --data - --allow-hosts api.github.com"); !ok {
		return code
	}
	var r wire.CredentialRequest
	if *file != "" {
		var in struct {
			wire.CredentialRequest
			CredentialType string `json:"credential_type"`
		}
		if err := readRequest(*file, os.Stdin, &in, "name, type, data, tags, description, meta, scope"); err != nil {
			return fail(stderr, "credentials set", err)
		}
		r = in.CredentialRequest
		if r.Type == "" {
			r.Type = in.CredentialType
		}
	}
	switch {
	case fs.NArg() == 1:
		r.Name = fs.Arg(0)
	case fs.NArg() > 1 || r.Name == "":
		fmt.Fprintln(stderr, "give exactly one credential name (or name in -f FILE)")
		fs.Usage()
		return exitUsage
	}
	if *data != "" {
		d, err := readDoc(*data, os.Stdin)
		if err != nil {
			return fail(stderr, "credentials set", err)
		}
		r.Data = d
	}
	if r.Data == nil {
		fmt.Fprintln(stderr, "noetl credentials set: give the data with --data FILE (or - for stdin), or -f FILE")
		return exitUsage
	}
	if *typ != "" {
		r.Type = *typ
	}
	if *tags != "" {
		r.Tags = config.SplitList(*tags)
	}
	if *desc != "" {
		r.Description = *desc
	}
	if *playbooks != "" || *pools != "" || *hosts != "" {
		if r.Scope == nil {
			r.Scope = &wire.CredentialScope{}
		}
		for _, f := range []struct {
			flag string
			dst  *[]string
		}{{*playbooks, &r.Scope.Playbooks}, {*pools, &r.Scope.Pools}, {*hosts, &r.Scope.Hosts}} {
			if list := config.SplitList(f.flag); len(list) > 0 {
				*f.dst = list
			}
		}
	}
	cred, err := c.client().PutCredential(ctx, r)
	return c.reply(stdout, stderr, "credentials set", cred, err, func() int {
		verb := "replaced"
		if cred.Created != nil && *cred.Created {
			verb = "created"
		}
		fmt.Fprintf(stdout, "%s credential %s (id %d, type %s), sealed under %s\n", verb, cred.Name, cred.ID, cred.Type, cred.KeyID)
		return exitOK
	})
}

func runCredentialList(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	typ := fs.String("type", "", "only credentials of this type")
	q := fs.String("q", "", "only credentials whose name or description contains this")
	if code, ok := flagsOnly(fs, args, "credentials list [flags]", "Lists credentials by name (never their data).", stderr); !ok {
		return code
	}
	list, err := c.client().Credentials(ctx, *typ, *q)
	if err != nil {
		return fail(stderr, "credentials list", err)
	}
	return c.reply(stdout, stderr, "credentials list", list.Items, nil, func() int {
		if len(list.Items) == 0 {
			fmt.Fprintln(stdout, "no credentials (add one: noetl credentials set NAME --type postgres --data FILE)")
			return exitOK
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tTYPE\tID\tTAGS\tUPDATED\tDESCRIPTION")
		for _, cr := range list.Items {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", cr.Name, cr.Type, cr.ID, orDash(strings.Join(cr.Tags, ",")), cr.UpdatedAt.Text(), orDash(cr.Description))
		}
		tw.Flush()
		return exitOK
	})
}

func runCredentialGet(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	return onOne(c, fs, args, stdout, stderr, "credentials get NAME [flags]", "Shows a credential's metadata. Its data is given only to workers, for the execution they run.", nameArg,
		func(cl *client.Client, name string) (*wire.Credential, error) {
			return cl.Credential(ctx, name, client.CredentialQuery{})
		},
		func(_ string, cr *wire.Credential) int { return printCredential(stdout, cr) })
}

// printCredential shows a credential's metadata and scope.
func printCredential(stdout io.Writer, cr *wire.Credential) int {
	fmt.Fprintf(stdout, "name         %s\nid           %d\ntype         %s\ntags         %s\ndescription  %s\nsealed under %s\ncreated      %s\nupdated      %s\n",
		cr.Name, cr.ID, cr.Type, orDash(strings.Join(cr.Tags, ",")), orDash(cr.Description), cr.KeyID, cr.CreatedAt.Text(), cr.UpdatedAt.Text())
	scope := wire.CredentialScope{}
	if cr.Scope != nil {
		scope = *cr.Scope
	}
	fmt.Fprintf(stdout, "playbooks    %s\npools        %s\nhosts        %s\n", orAny(scope.Playbooks), orAny(scope.Pools), orAny(scope.Hosts))
	return exitOK
}

func runCredentialDelete(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	return onOne(c, fs, args, stdout, stderr, "credentials delete NAME [flags]", "Deletes a credential; steps naming it fail from then on.", nameArg,
		func(cl *client.Client, name string) (*wire.CredentialDeleted, error) {
			return cl.DeleteCredential(ctx, name)
		},
		func(name string, d *wire.CredentialDeleted) int {
			fmt.Fprintf(stdout, "deleted credential %s (id %d)\n", name, d.ID)
			return exitOK
		})
}

func runCredentialReads(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	exec := fs.Int64("execution", 0, "only reads for this execution")
	limit := fs.Int("limit", 100, "at most this many, newest first (up to 1000)")
	name, code, ok := oneArg(fs, args, stderr, "credentials reads NAME [flags]", "Lists who read a credential (scope, token fingerprint, worker), for which execution, and what was answered.", nameArg)
	if !ok {
		return code
	}
	reads, err := c.client().CredentialReads(ctx, name, *exec, *limit)
	if err != nil {
		return fail(stderr, "credentials reads", err)
	}
	return c.reply(stdout, stderr, "credentials reads", reads.Items, nil, func() int { return printReads(stdout, name, reads.Items) })
}

// printReads is a credential's read log as a table.
func printReads(stdout io.Writer, name string, reads []wire.CredentialRead) int {
	if len(reads) == 0 {
		fmt.Fprintf(stdout, "no reads of %s\n", name)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WHEN\tOUTCOME\tDATA\tEXECUTION\tSCOPE\tTOKEN\tWORKER\tREASON")
	for _, r := range reads {
		execText := "-"
		if r.ExecutionID != 0 {
			execText = strconv.FormatInt(int64(r.ExecutionID), 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\t%s\t%s\n", r.ReadAt.Text(), r.Outcome, r.IncludeData, execText, r.Scope,
			orDash(string(r.Token)), orDash(string(r.WorkerID)), orDash(string(r.Reason)))
	}
	tw.Flush()
	return exitOK
}

func runCredentialRotate(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	newKey := fs.Bool("new-key", false, "make a new current key first (a key file; with KMS, point the key id or its alias at a new key instead)")
	batch := fs.Int("batch", 100, "credentials resealed per request (1..1000)")
	if code, ok := flagsOnly(fs, args, "credentials rotate [flags]",
		"Reseals every credential under the keychain's current key, a batch per request, until none is left\n"+
			"under an older key. Old keys keep opening what they sealed until then.", stderr); !ok {
		return code
	}
	cl := c.client()
	req := wire.RotateRequest{NewKey: *newKey, Limit: *batch}
	total := 0
	for {
		r, err := cl.RotateCredentials(ctx, req)
		if err != nil {
			return fail(stderr, "credentials rotate", err)
		}
		if r.NewKey {
			fmt.Fprintf(stdout, "new key %s\n", r.KeyID)
		}
		total += r.Resealed
		if !c.asJSON {
			fmt.Fprintf(stdout, "resealed %d (%d in all), %d left under older keys\n", r.Resealed, total, r.Remaining)
		}
		if r.Remaining == 0 {
			if c.asJSON {
				printJSON(stdout, wire.Rotation{KeyID: r.KeyID, NewKey: *newKey, Resealed: total})
			} else {
				fmt.Fprintf(stdout, "every credential is sealed under %s\n", r.KeyID)
			}
			return exitOK
		}
		if r.Resealed == 0 {
			return fail(stderr, "credentials rotate", fmt.Errorf("%d credentials remain under older keys and none could be resealed (another rotation running?)", r.Remaining))
		}
		req.NewKey = false
	}
}

// orAny is a scope list as shown: "any" when empty.
func orAny(list []string) string {
	if len(list) == 0 {
		return "any"
	}
	return strings.Join(list, ", ")
}
