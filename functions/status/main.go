// Command status is the NoETL status Lambda function (see shared/lambdafn).
package main

import (
	"github.com/noetl-go/noetl/shared/dashboard"
	"github.com/noetl-go/noetl/shared/lambdafn"
)

func main() { lambdafn.Main("status", lambdafn.Env{Dashboard: dashboard.Files{}}) }
