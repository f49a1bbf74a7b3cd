// Command replay is the NoETL replay Lambda function (see shared/lambdafn).
package main

import "github.com/noetl-go/noetl/shared/lambdafn"

func main() { lambdafn.Main("replay", lambdafn.Env{}) }
