// Command schedules is the NoETL schedules Lambda function (see
// shared/lambdafn): the schedule routes, and the firing its EventBridge
// Scheduler entries and per-minute sweep invoke. Only this function links
// the EventBridge Scheduler client (shared/awssched).
package main

import (
	"github.com/noetl-go/noetl/shared/awssched"
	"github.com/noetl-go/noetl/shared/lambdafn"
)

func main() { lambdafn.Main("schedules", lambdafn.Env{OpenSchedules: awssched.New}) }
