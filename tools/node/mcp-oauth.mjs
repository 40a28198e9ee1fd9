// An MCP client that signs in with OAuth the way the MCP authorization
// spec describes, driven by the official TypeScript SDK's auth support: it
// starts with no token, meets the server's 401, follows its
// resource_metadata to the protected resource metadata (RFC 9728), from
// there to the authorization server's metadata (RFC 8414, or OpenID
// Connect discovery), gets a token with client credentials, and calls
// tools with it.
//
//   MCP_URL=http://127.0.0.1:8080/mcp OAUTH_ISSUER=http://127.0.0.1:4444/ \
//   OAUTH_CLIENT_ID=… OAUTH_CLIENT_SECRET=… node tools/node/mcp-oauth.mjs
//
// It prints every HTTP exchange (one line each: "> METHOD URL", "< STATUS"
// and the WWW-Authenticate header of a 401), then the tool calls' results,
// then "ok". The token itself is never printed.
//
// Ory Hydra takes the audience of a token as `audience`, not RFC 8707's
// `resource`, which the SDK sends: the fetch below copies one into the
// other on token requests (the one adaptation to Hydra).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';

const env = (name) => {
    const v = process.env[name];
    if (!v) {
        console.error(`${name} is not set`);
        process.exit(2);
    }
    return v;
};
const mcpURL = new URL(env('MCP_URL'));
const scope = process.env.OAUTH_SCOPE || undefined;
const toolPath = process.env.MCP_TOOL_PATH || 'signed-in/hello.txt';

const log = (line) => process.stdout.write(line + '\n');

async function tracingFetch(input, init = {}) {
    const url = typeof input === 'string' ? input : input.url ?? String(input);
    const method = init.method ?? 'GET';
    if (init.body instanceof URLSearchParams && init.body.has('grant_type') && init.body.has('resource') && !init.body.has('audience')) {
        init = { ...init, body: new URLSearchParams(init.body) };
        init.body.set('audience', init.body.get('resource'));
    }
    const extra = init.body instanceof URLSearchParams ? ` (${[...init.body.keys()].filter((k) => k !== 'code_verifier').map((k) => `${k}=${k === 'client_secret' ? '…' : init.body.get(k)}`).join(' ')})` : '';
    log(`> ${method} ${url}${extra}`);
    const res = await fetch(input, init);
    const challenge = res.headers.get('www-authenticate');
    log(`< ${res.status}${challenge ? ` WWW-Authenticate: ${challenge}` : ''}`);
    return res;
}

const provider = new ClientCredentialsProvider({
    clientId: env('OAUTH_CLIENT_ID'),
    clientSecret: env('OAUTH_CLIENT_SECRET'),
    expectedIssuer: env('OAUTH_ISSUER'),
    scope,
});
const transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider, fetch: tracingFetch });
const client = new Client({ name: 'agentfs-oauth-check', version: '1.0.0' });
await client.connect(transport);
const tools = await client.listTools();
log(`tools: ${tools.tools.map((t) => t.name).sort().join(' ')}`);
const wrote = await client.callTool({ name: 'write_file', arguments: { path: toolPath, content: 'signed in through OAuth' } });
log(`write_file: ${wrote.isError ? 'error ' : ''}${wrote.content?.map((c) => c.text).join(' ')}`);
const read = await client.callTool({ name: 'read_text_file', arguments: { path: toolPath } });
log(`read_text_file: ${read.isError ? 'error ' : ''}${read.content?.map((c) => c.text).join(' ')}`);
await client.close();
log(wrote.isError || read.isError ? 'failed' : 'ok');
