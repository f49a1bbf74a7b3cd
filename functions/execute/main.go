// Command execute is the NoETL execute Lambda function (see shared/lambdafn).
package main

import "github.com/noetl-go/noetl/shared/lambdafn"

func main() { lambdafn.Main("execute", lambdafn.Env{}) }
