package tools

// CheatsheetFirst is how the description of a tool with a cheatsheet
// opens: ADR-036's sentence (Decision 4, the Notion pattern), with at the
// cheatsheet's address for the reader (the MCP resource's URI, or the REST
// URL).
func CheatsheetFirst(at string) string {
	return "Before any write or non-trivial query, fetch " + at + " first. Do NOT guess property names or association types."
}

// builtinCheatsheets are the built-in tools' cheatsheets: what an agent
// should know before it writes with each (served at
// gatehouse://tools/<name>/cheatsheet and GET /api/v1/tools/<name>/cheatsheet).
var builtinCheatsheets = map[string]string{
	"records.search": `# records.search

- Finds records whose key or value contains ` + "`query`" + ` (case-insensitive), optionally in one ` + "`collection`" + `; at most 50.
- A ` + "`query`" + ` of one or two characters matches only the **start of a key** (in key order): to find text inside keys or values, send three characters or more.
- A read: it runs at once. Search before you write, so you update the record that exists instead of creating a twin.
`,
	"records.get": `# records.get

- Reads one record by ` + "`collection`" + ` and ` + "`key`" + `; a missing one fails the call ("No record …"), it is not an empty result.
- A read: it runs at once.
`,
	"records.put": `# records.put

- Creates or **replaces** a record's whole ` + "`value`" + ` (an upsert): read it first (records.get) and send every field you want to keep.
- Idempotent: the same call twice leaves the same record, so no idempotency key is needed.
- A change: it runs at once only where the owner set the conversation to auto (or the notebook to trusted); otherwise it waits for their confirmation. Tell the owner what you changed and why in the rationale.
`,
	"notes.append": `# notes.append

- Appends ` + "`text`" + ` to an existing record's notes; the record must exist (records.get first).
- Not idempotent: every call adds a note. Send an ` + "`idempotency_key`" + ` you make up, and reuse it only to retry the same call.
`,
	"records.delete": `# records.delete

- Deletes one record. **It cannot be undone**: read the record first and say in the rationale why it must go.
- High risk (destructive): every call waits for an approver unless the workspace auto-approves high risk, and then for the owner's confirmation, in every mode. Needs an ` + "`idempotency_key`" + `.
`,
	"records.bulk_delete": `# records.bulk_delete

- Deletes up to 1000 records of one collection, each key once. **It cannot be undone.**
- High risk (destructive): every call waits for an approver unless the workspace auto-approves high risk, and then for the owner's confirmation; more than ten keys need an approver in any case. Needs an ` + "`idempotency_key`" + `.
- Prefer a few precise calls over one broad one, and list exactly the keys you read.
`,
	"email.send": `# email.send

- Sends an email (plain text ` + "`body`" + `) to one recipient ` + "`to`" + `.
- High risk: every call waits for an approver unless the workspace auto-approves high risk. Mail to a domain outside the workspace's internal domains is external.
- Not idempotent: send an ` + "`idempotency_key`" + `, and reuse it only to retry the same message.
- Limits: 10 a minute per caller, 100 an hour and 500 a day per workspace.
`,
	"webhook.post": `# webhook.post

- POSTs ` + "`payload`" + ` (a JSON object) to ` + "`url`" + `, whose host must be on the workspace's webhook allowlist; any answer but 2xx fails the call.
- High risk (the payload leaves the workspace): every call waits for an approver unless the workspace auto-approves high risk. A host off the allowlist is refused at once, before any approver sees it.
- Not idempotent: send an ` + "`idempotency_key`" + `. At most 30 calls a minute per caller.
`,
	"payment.initiate": `# payment.initiate

- Only the principal performs payments: your call prepares the payment and is refused to you; the owner performs it and records that they did.
- Give the exact ` + "`amount`" + ` (to the cent), the ISO ` + "`currency`" + ` and the ` + "`payee`" + `, and an ` + "`idempotency_key`" + `.
`,
}
