// The official TypeScript SDK's client against Gatehouse's /mcp: connect,
// list the tools, call records.search a few times, end the session, and
// print what happened as one JSON line. Run by web/node_test.go.
//
//   node client.mjs <mcp url> <bearer token> <calls>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, calls = "4"] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "ts-sdk-client", version: "1.0.0" });
const out = { tools: 0, results: [] };
try {
  await client.connect(transport);
  out.sessionId = transport.sessionId;
  for (let i = 0; i < 3; i++) {
    out.tools = (await client.listTools()).tools.length;
  }
  for (let i = 0; i < Number(calls); i++) {
    const res = await client.callTool({
      name: "records.search",
      arguments: { query: `q${i}`, rationale: "find the customer's record" },
    });
    out.results.push({ isError: !!res.isError, status: res.structuredContent?.status });
  }
  await transport.terminateSession();
  await client.close();
} catch (err) {
  out.error = String(err?.stack ?? err);
}
console.log(JSON.stringify(out));
