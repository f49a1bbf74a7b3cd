// Command catalog is the NoETL catalog Lambda function (see shared/lambdafn).
package main

import "github.com/noetl-go/noetl/shared/lambdafn"

func main() { lambdafn.Main("catalog", lambdafn.Env{}) }
