package engine_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// clauseTests maps each clause of dsl.md §2–§5 and each ruling the engine (with
// its template and pipeline packages, and the playbook definitions it runs)
// decides to the tests that pin it. Names without a package prefix are in this
// package; tmpl., pipeline., playbook. and parser. (shared/playbook/parser) name
// the others. TestClauseTable keeps it honest.
var clauseTests = map[string][]string{
	// dsl.md §2: every step field.
	"dsl§2 step":    {"parser.TestParseStepFields", "parser.TestParseErrors"},
	"dsl§2 desc":    {"parser.TestParseStepFields", "parser.TestParseWarnings"},
	"dsl§2 when":    {"TestDispatchWhen", "TestWhenStringRule"},
	"dsl§2 input":   {"TestCommandPayload", "parser.TestParseStepFields"},
	"dsl§2 tool":    {"parser.TestParseStepFields", "TestCommandPayload"},
	"dsl§2 loop":    {"TestLoopCollections", "TestLoopSequential", "TestLoopParallel"},
	"dsl§2 set":     {"TestSetAndRouting", "parser.TestParseStepFields"},
	"dsl§2 next":    {"parser.TestParseNextShapes", "TestSetAndRouting"},
	"dsl§2 retry":   {"TestRetry", "TestRetryClasses", "parser.TestParseStepFields"},
	"dsl§2 timeout": {"parser.TestParseStepFields", "parser.TestParseAliases", "parser.TestParseDefaults"},
	"dsl§2 spec":    {"TestOnErrorContinue", "TestMaxVisits", "parser.TestParseNextShapes"},
	// dsl.md §3: the four next shapes and the two modes.
	"dsl§3 router":          {"parser.TestParseNextShapes"},
	"dsl§3 list of maps":    {"parser.TestParseNextShapes", "TestListOfMapsFiresEveryTrueArc", "TestLedgerMerge"},
	"dsl§3 list of strings": {"parser.TestParseNextShapes", "TestCompletion"},
	"dsl§3 string":          {"parser.TestParseNextShapes", "TestCycles"},
	"dsl§3 exclusive":       {"TestSetAndRouting", "TestSkipCascade"},
	"dsl§3 inclusive":       {"TestJoins", "TestFedFromCycleRunsOnce"},
	"dsl§3 arc set":         {"TestLedgerMerge", "parser.TestParseArcSetAndArgs", "TestArcSetInStepEnter"},
	// dsl.md §4: every numbered clause.
	"dsl§4.1":  {"TestStart"},
	"dsl§4.2":  {"TestDispatchWhen", "TestLoopCollections", "TestLoopSequential", "TestLoopParallel", "TestEmptyLoop"},
	"dsl§4.3":  {"TestToolOutcomeFails"},
	"dsl§4.4":  {"TestRetry", "TestRetryClasses", "TestRenderErrorNotRetried"},
	"dsl§4.5":  {"TestStepResults", "TestLoopIterationFailure", "pipeline.TestResultShape"},
	"dsl§4.6":  {"TestSetAndRouting", "TestNotRunAndSkippedBindings"},
	"dsl§4.7":  {"TestFailureWaitsForRunning", "TestOnErrorContinue", "TestLateCompletionWhileFailing"},
	"dsl§4.8":  {"TestJoins", "TestSkipCascade", "TestAncestors"},
	"dsl§4.9":  {"TestCycles", "TestMaxVisits"},
	"dsl§4.10": {"TestCompletion"},
	"dsl§4.11": {"TestCancel", "TestCancelWhileFailing"},
	"dsl§4.12": {"TestDeterminism", "TestRandomSchedules"},
	// dsl.md §5: templates.
	"dsl§5 filters":   {"tmpl.TestFilters"},
	"dsl§5 operators": {"tmpl.TestOperators", "tmpl.TestTests"},
	"dsl§5 native":    {"tmpl.TestNativeRendering", "tmpl.TestLiteralAndNative"},
	"dsl§5 string":    {"tmpl.TestTextRendering"},
	"dsl§5 when":      {"tmpl.TestWhenRendering", "TestWhenStringRule"},
	"dsl§5 code":      {"TestCommandPayload", "parser.TestParseWarnings"},
	"dsl§5 context":   {"TestNotRunAndSkippedBindings", "TestAttemptsAndVisitsView", "TestLedgerMerge", "TestArcSetInStepEnter"},
	"dsl§5 errors":    {"tmpl.TestErrors", "tmpl.TestErrorFormat", "TestRenderErrorNotRetried"},
	"dsl§5 compile":   {"tmpl.TestCache", "tmpl.TestRoots", "parser.TestParseErrors"},
	// rulings.md group J.
	"R-J1": {"playbook.TestAnalyse", "TestAncestors"},
	"R-J2": {"TestLedgerMerge", "TestVisitsCoalesce", "TestArcsIntoRunningVisitAreHeld"},
	"R-J3": {"TestJoins", "TestVisitsCoalesce", "TestFedFromDeadlockedCycleRunsAfterIt"},
	"R-J4": {"TestSkipCascade", "TestDispatchWhen"},
	"R-J5": {"TestCostPerEventDoesNotGrow", "TestCostPerEventChainLength"},
	"R-J6": {"TestDeadlockBreaker", "TestFedFromDeadlockedCycleRunsAfterIt"},
	"R-J7": {"TestVisitsCoalesce", "TestFedFromCycleRunsOnce", "TestArcsIntoRunningVisitAreHeld", "TestFedFromDeadlockedCycleRunsAfterIt"},
	"R-J8": {"TestMaxVisits"},
	"R-J9": {"parser.TestParseNextShapes", "parser.TestParseArcSetAndArgs", "parser.TestParseWarnings"},
	// group S.
	"R-S1": {"TestSnapshotActiveOnly", "TestCostPerEventDoesNotGrow"},
	"R-S2": {"TestSnapshotActiveOnly", "TestCommandPayload", "tmpl.TestRoots"},
	"R-S3": {"TestCommandPayload"},
	"R-S4": {"TestSeqAndTimes", "TestRandomSchedules"},
	// group T.
	"R-T1":  {"tmpl.TestRulings", "tmpl.TestTruthyWhenTrueText"},
	"R-T2":  {"tmpl.TestTextRendering", "tmpl.TestTruthyWhenTrueText"},
	"R-T3":  {"TestNotRunAndSkippedBindings", "tmpl.TestRulings"},
	"R-T4":  {"tmpl.TestRulings", "tmpl.TestNowNeedsTime"},
	"R-T5":  {"tmpl.TestRulings"},
	"R-T6":  {"parser.TestParseWarnings", "TestCommandPayload", "parser.TestParseLiteralFieldsWarn"},
	"R-T7":  {"parser.TestParseErrors"},
	"R-T8":  {"TestLatestFinishedVisit", "TestAttemptsAndVisitsView"},
	"R-T9":  {"parser.TestParseStepFields", "parser.TestParseErrors", "TestLedgerMerge", "TestContextUpdatesBeforeSet", "TestArcSetInStepEnter"},
	"R-T10": {"TestNumbersStayInt", "parser.TestParseKeepsLiteralStrings", "tmpl.TestRulings"},
	"R-T11": {"tmpl.TestBlocks"},
	// group N.
	"R-N1": {"TestUnsupportedKindFailsAtDispatch", "parser.TestParseWarnings", "parser.TestParseErrors"},
	"R-N2": {"parser.TestParseAliases"},
	"R-N3": {"parser.TestParseErrors", "pipeline.TestPolicyRules"},
	"R-N4": {"parser.TestParseAliases", "parser.TestParseMetadataErrors"},
	// group W.
	"R-W1": {"pipeline.TestRunningContext", "TestConformanceVarsTemplateAccess"},
	"R-W2": {"TestEventBinding"},
	"R-W3": {"TestSequentialLoopContext", "TestLoopIterationFailure", "TestSetAndRouting"},
	"R-W4": {"TestCompletion", "parser.TestParseWarnings", "playbook.TestAnalyse"},
	"R-W5": {"TestWorkloadTemplating", "parser.TestParseWarnings"},
	"R-W6": {"pipeline.TestErrorKinds", "pipeline.TestPolicyRules"},
	"R-W7": {"parser.TestParseAliases", "parser.TestParseErrors", "tmpl.TestRulings"},
	// group R, R-R4…R-R11.
	"R-R4":  {"pipeline.TestResultShape", "TestConformanceStartWithAction"},
	"R-R5":  {"TestContextUpdatesBeforeSet", "pipeline.TestContextUpdates"},
	"R-R6":  {"pipeline.TestPolicyRules", "TestConformancePagination"},
	"R-R7":  {"TestCompletion"},
	"R-R8":  {"TestCanonicalSequences"},
	"R-R9":  {"TestFailureWaitsForRunning", "TestLateCompletionWhileFailing"},
	"R-R10": {"TestCancel", "TestCancelWhileFailing"},
	"R-R11": {"TestCompletion"},
	// R-A9.
	"R-A9": {"TestLoopWhenOnce", "TestLoopCollections", "TestLoopSequential", "TestEventBinding", "parser.TestParseDefaults"},
}

// testNames lists the Test and Fuzz functions declared in a directory's tests.
func testNames(t *testing.T, dir, prefix string) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if len(files) == 0 {
		t.Fatalf("no test files in %s", dir)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil &&
				(strings.HasPrefix(fn.Name.Name, "Test") || strings.HasPrefix(fn.Name.Name, "Fuzz")) {
				names[prefix+fn.Name.Name] = true
			}
		}
	}
	return names
}

func TestClauseTable(t *testing.T) {
	have := testNames(t, ".", "")
	for name := range testNames(t, "../tmpl", "tmpl.") {
		have[name] = true
	}
	for name := range testNames(t, "../pipeline", "pipeline.") {
		have[name] = true
	}
	for name := range testNames(t, "../playbook", "playbook.") {
		have[name] = true
	}
	for name := range testNames(t, "../playbook/parser", "parser.") {
		have[name] = true
	}
	for clause, tests := range clauseTests {
		if len(tests) == 0 {
			t.Errorf("%s has no test", clause)
		}
		for _, name := range tests {
			if !have[name] {
				t.Errorf("%s lists %s, which does not exist", clause, name)
			}
		}
	}
	// dsl.md §4 has twelve numbered clauses; each must be listed.
	for i := 1; i <= 12; i++ {
		if _, ok := clauseTests["dsl§4."+strconv.Itoa(i)]; !ok {
			t.Errorf("dsl.md §4.%d is not in the table", i)
		}
	}
	// Every ruling of the engine's groups, read from rulings.md itself.
	src, err := os.ReadFile(filepath.Join(specDir(t), "rulings.md"))
	if err != nil {
		t.Fatal(err)
	}
	ids := regexp.MustCompile(`\*\*(R-[A-Z]+[0-9]+)`).FindAllStringSubmatch(string(src), -1)
	var required []string
	for _, m := range ids {
		id := m[1]
		group, num := id[2:3], atoi(id[3:])
		if strings.Contains("JSTNW", group) || (group == "R" && num >= 4 && num <= 11) || id == "R-A9" {
			required = append(required, id)
		}
	}
	sort.Strings(required)
	if len(required) < 40 {
		t.Fatalf("read only %d rulings from rulings.md: %v", len(required), required)
	}
	for _, id := range required {
		if _, ok := clauseTests[id]; !ok {
			t.Errorf("ruling %s is not in the clause table", id)
		}
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
