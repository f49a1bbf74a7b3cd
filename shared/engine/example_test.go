package engine_test

import (
	"fmt"

	"github.com/noetl-go/noetl/shared/engine"
)

// Command ids are NoETL's: the execution, the step and the command.issued
// event that created the command, plus the index of a loop iteration.
func ExampleCommandID() {
	fmt.Println(engine.CommandID(1025, "fetch", 2049, -1))
	fmt.Println(engine.CommandID(1025, "fetch", 2049, 3))
	// Output:
	// 1025:fetch:2049
	// 1025:fetch:2049:i3
}
