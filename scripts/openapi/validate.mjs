// Validates an OpenAPI document (make test: openapi.json, which a Go test
// keeps equal to GET /api/openapi.json): its structure against the OpenAPI
// 3 schema, then its semantics ($refs resolve, operationIds are unique, path
// parameters are declared). Exits non-zero with the validator's message.
import SwaggerParser from "@apidevtools/swagger-parser";

const file = process.argv[2];
if (!file) {
  console.error("usage: node validate.mjs <openapi.json>");
  process.exit(2);
}
try {
  const api = await SwaggerParser.validate(file);
  const ops = Object.values(api.paths).reduce((n, item) => n + Object.keys(item).length, 0);
  console.log(`${file}: valid OpenAPI ${api.openapi}, ${Object.keys(api.paths).length} paths, ${ops} operations`);
} catch (err) {
  // One mistake in a shared schema repeats at every use: the first lines say it.
  const lines = String(err.message).split("\n");
  const more = lines.length > 25 ? `\n  ... ${lines.length - 25} more lines` : "";
  console.error(`${file}: not a valid OpenAPI document: ${lines.slice(0, 25).join("\n")}${more}`);
  process.exit(1);
}
