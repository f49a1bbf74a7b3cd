// Command ingest is the NoETL ingest Lambda function (see shared/lambdafn).
package main

import "github.com/noetl-go/noetl/shared/lambdafn"

func main() { lambdafn.Main("ingest", lambdafn.Env{OpenResults: lambdafn.OpenResultStore}) }
