// The official TypeScript SDK's client calls tools that declare an output
// schema: the SDK checks every result's structuredContent against the
// schema Gatehouse lists, and throws when it does not match. Prints one
// JSON line: each call's result, or the SDK's error. Run by
// web/node_output_test.go.
//
//   node output-client.mjs <mcp url> <bearer token> <calls as JSON: [{name, arguments}]>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, calls] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "ts-sdk-output-client", version: "1.0.0" });
const out = { results: [] };
try {
  await client.connect(transport);
  const tools = (await client.listTools()).tools;
  out.withOutputSchema = tools.filter((t) => t.outputSchema).map((t) => t.name);
  for (const call of JSON.parse(calls)) {
    try {
      const res = await client.callTool(call);
      out.results.push({ name: call.name, isError: !!res.isError, structured: res.structuredContent ?? null });
    } catch (err) {
      out.results.push({ name: call.name, error: String(err?.message ?? err) });
    }
  }
  await transport.terminateSession();
  await client.close();
} catch (err) {
  out.error = String(err?.stack ?? err);
}
console.log(JSON.stringify(out));
