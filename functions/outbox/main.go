// Command outbox is the NoETL outbox Lambda function (see shared/lambdafn).
package main

import "github.com/noetl-go/noetl/shared/lambdafn"

func main() { lambdafn.Main("outbox", lambdafn.Env{}) }
