// The official TypeScript SDK's client with its OAuth client provider,
// against Gatehouse's /mcp and nothing but its URL: the 401 leads it to
// the protected resource metadata, it registers itself, and it starts the
// authorization code flow with PKCE. It prints the authorization URL as
// one JSON line ({"authorize": url}) for a person's browser to open (the
// test drives Chromium there), waits on its loopback redirect listener for
// the code, exchanges it, connects, lists the tools, calls one, and
// prints what happened as a last JSON line. Run by web/node_oauth_test.go.
//
//   node oauth-client.mjs <mcp url> <tool> <arguments as JSON>
import http from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [url, tool, args = "{}"] = process.argv.slice(2);
const out = { tools: [], steps: [] };
const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");

// The redirect listener, on a loopback port of its own (RFC 8252).
let deliver;
const delivered = new Promise((resolve) => (deliver = resolve));
const listener = http.createServer((req, res) => {
  const u = new URL(req.url, "http://127.0.0.1");
  if (u.pathname !== "/callback") {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
  res.end('<!doctype html><title>Connected</title><p id="done">You may close this window.</p>');
  deliver(Object.fromEntries(u.searchParams));
});
await new Promise((resolve) => listener.listen(0, "127.0.0.1", resolve));
const redirectUrl = `http://127.0.0.1:${listener.address().port}/callback`;

// An in-memory provider, as a CLI agent would keep its credentials.
const store = {};
const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: "TS SDK Agent",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientInformation: () => store.client,
  saveClientInformation: (c) => {
    store.client = c;
    out.steps.push("registered");
  },
  tokens: () => store.tokens,
  saveTokens: (t) => {
    store.tokens = t;
    out.steps.push("tokens");
  },
  redirectToAuthorization: (u) => {
    out.steps.push("authorize");
    emit({ authorize: u.toString() });
  },
  saveCodeVerifier: (v) => {
    store.verifier = v;
  },
  codeVerifier: () => store.verifier,
};

try {
  const first = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  const client = new Client({ name: "ts-sdk-oauth-client", version: "1.0.0" });
  try {
    await client.connect(first);
    throw new Error("connected without authorization");
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  const back = await delivered;
  out.redirect = { hasCode: !!back.code, iss: back.iss, error: back.error };
  if (!back.code) throw new Error(`no code came back: ${JSON.stringify(back)}`);
  await first.finishAuth(back.code);
  out.scope = store.tokens?.scope;

  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await client.connect(transport);
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  const res = await client.callTool({ name: tool, arguments: JSON.parse(args) });
  out.result = { isError: !!res.isError, status: res.structuredContent?.status };
  await transport.terminateSession();
  await client.close();
} catch (err) {
  out.error = String(err?.stack ?? err);
} finally {
  listener.close();
}
emit(out);
