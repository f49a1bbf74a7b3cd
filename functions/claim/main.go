// Command claim is the NoETL claim Lambda function (see shared/lambdafn).
package main

import "github.com/noetl-go/noetl/shared/lambdafn"

func main() { lambdafn.Main("claim", lambdafn.Env{}) }
