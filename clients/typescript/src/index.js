// @ts-check
import { createHash } from "node:crypto";

/**
 * Gatehouse for agents whose tools run in their own process: `gate()`
 * wraps a tool function so that every call is proposed to Gatehouse with
 * the tool's declaration, waits (long-poll) while a person decides, runs
 * only with an execution ticket and with exactly the arguments the ticket
 * allows, and reports the outcome. A refusal, a rejection or a wait that
 * runs out is a typed error whose message is written for the model.
 *
 * See docs/caller-tools.md and docs/gate-your-own-tools.md in the
 * Gatehouse repository. Types of the REST API are generated from
 * web/openapi.yaml (types/openapi.d.ts).
 *
 * @typedef {import("../types/openapi.js").components["schemas"]["Proposal"]} Proposal
 * @typedef {import("../types/openapi.js").components["schemas"]["Problem"]} Problem
 * @typedef {import("../types/openapi.js").components["schemas"]["CallerDeclaration"]} CallerDeclaration
 */

/**
 * A tool as its agent declares it to Gatehouse.
 *
 * @typedef {object} ToolDefinition
 * @property {string} name Dot notation, such as `shop.lookup_order`; not a tool Gatehouse runs.
 * @property {string} description What the tool does, shown to the person who may be asked.
 * @property {"read" | "mutate" | "destructive"} effect
 * @property {"read" | "write-idempotent" | "write-non-idempotent" | "irreversible"} authority
 *   Fits the effect; write-non-idempotent and irreversible calls get an idempotency key per invocation.
 * @property {string} [actionClass] A registered action class (by default read.context for a read, tool.call.local for a change).
 * @property {Record<string, unknown>} [schema] The JSON Schema of the arguments (type: object).
 */

/**
 * @typedef {object} GateOptions
 * @property {string | ((args: any) => string)} [rationale] Why the call is made (10 to 500 characters); by default the tool's description.
 * @property {number} [timeoutMs] How long to wait for a person before GatehouseTimeout (default 120000).
 * @property {AbortSignal} [signal] Stops the wait (the call then does not run).
 * @property {boolean} [declare] Send the declaration with each call (default true; false for a tool the policy file declares).
 * @property {number} [maxResultBytes] A result larger than this (its JSON) is reported as its SHA-256 (default 65536).
 * @property {(err: unknown, proposal: Proposal) => void} [onReportError] Told when the outcome could not be reported (default: console.warn).
 * @property {(proposal: Proposal) => void} [onWaiting] Told once when the call waits for a person (its confirm_url or approval_url says where).
 */

/**
 * What a wrapped tool is called with besides its arguments: LangChain's
 * RunnableConfig fits (its signal is honoured).
 *
 * @typedef {object} CallOptions
 * @property {AbortSignal} [signal]
 * @property {string} [rationale]
 */

const DEFAULT_TIMEOUT_MS = 120_000;
const DEFAULT_MAX_RESULT = 64 << 10;
const SERVER_MAX_RESULT = 256 << 10;

/** Every error of this client. */
export class GatehouseError extends Error {
  /**
   * @param {string} message
   * @param {{tool?: string, proposal?: Proposal, problem?: Problem, status?: number}} [info]
   */
  constructor(message, info = {}) {
    super(message);
    this.name = "GatehouseError";
    /** The tool's name. */
    this.tool = info.tool;
    /** The call as Gatehouse recorded it, when it was recorded. */
    this.proposal = info.proposal;
    /** The problem document Gatehouse answered, for a refusal. */
    this.problem = info.problem;
    /** The HTTP status, for a refusal. */
    this.status = info.status;
  }
}

/**
 * Gatehouse refused the call: a decision layer (blocked, human-only, a
 * constraint, the token's scope), a rate limit, or input it does not
 * accept (the declaration, the arguments). The tool did not run.
 */
export class GatehouseRefused extends GatehouseError {
  /**
   * @param {string} message
   * @param {{tool?: string, proposal?: Proposal, problem?: Problem, status?: number, layer?: string, fields?: string[], retryAfter?: number}} [info]
   */
  constructor(message, info = {}) {
    super(message, info);
    this.name = "GatehouseRefused";
    /** The decision layer that refused it, when one did. */
    this.layer = info.layer;
    /** The fields at fault, for input Gatehouse does not accept. */
    this.fields = info.fields ?? [];
    /** Seconds to wait before trying again, for a rate limit. */
    this.retryAfter = info.retryAfter;
  }
}

/** A person rejected the call, or nobody approved it in time. The tool did not run. */
export class GatehouseRejected extends GatehouseError {
  /**
   * @param {string} message
   * @param {{tool?: string, proposal?: Proposal, reason?: string}} [info]
   */
  constructor(message, info = {}) {
    super(message, info);
    this.name = "GatehouseRejected";
    /** The reason the person gave (the model may read it). */
    this.reason = info.reason;
  }
}

/** The call still waits for a person after the timeout. The tool did not run. */
export class GatehouseTimeout extends GatehouseError {
  /**
   * @param {string} message
   * @param {{tool?: string, proposal?: Proposal}} [info]
   */
  constructor(message, info = {}) {
    super(message, info);
    this.name = "GatehouseTimeout";
  }
}

/** The client of one Gatehouse, for one scope (a conversation or a notebook). */
export class Gatehouse {
  /**
   * @param {object} options
   * @param {string} options.baseUrl Such as https://gatehouse.example.com.
   * @param {string} options.token An API token (an agent token for an agent).
   * @param {{conversation?: string, notebook?: string}} options.scope Where the calls are proposed.
   * @param {typeof fetch} [options.fetch]
   */
  constructor({ baseUrl, token, scope, fetch: fetchImpl }) {
    if (!baseUrl || !token) throw new TypeError("Gatehouse: baseUrl and token are required");
    if (!scope || (!scope.conversation === !scope.notebook)) {
      throw new TypeError("Gatehouse: scope names exactly one of conversation and notebook");
    }
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = token;
    this.scope = scope;
    this.fetch = fetchImpl ?? globalThis.fetch;
  }

  /**
   * A conversation for the token's user, to propose calls in.
   *
   * @param {object} options
   * @param {string} options.baseUrl
   * @param {string} options.token
   * @param {string} [options.title]
   * @param {typeof fetch} [options.fetch]
   * @returns {Promise<Gatehouse>}
   */
  static async inNewConversation({ baseUrl, token, title, fetch: fetchImpl }) {
    const probe = new Gatehouse({ baseUrl, token, scope: { conversation: "-" }, fetch: fetchImpl });
    const { status, body } = await probe.request("POST", "/api/v1/conversations", { title: title ?? "Agent" });
    if (status !== 201) throw new GatehouseError(`Gatehouse: could not start a conversation (${status}): ${body?.detail ?? ""}`);
    return new Gatehouse({ baseUrl, token, scope: { conversation: body.id }, fetch: fetchImpl });
  }

  /**
   * Wraps an async tool function: see the module's comment.
   *
   * @template A, R
   * @param {ToolDefinition} tool
   * @param {(args: A, options?: CallOptions) => Promise<R> | R} fn
   * @param {GateOptions} [options]
   * @returns {(args: A, callOptions?: CallOptions) => Promise<R>}
   */
  gate(tool, fn, options = {}) {
    checkDefinition(tool);
    return async (args, callOptions = {}) => {
      const ticketed = await this.permission(tool, args, { ...options, ...pick(callOptions) });
      if (ticketed.done) return /** @type {R} */ (ticketed.proposal.result ?? null);
      const { proposal, ticket, runArgs } = ticketed;
      let result;
      try {
        result = await fn(/** @type {A} */ (runArgs), { ...callOptions, signal: callOptions.signal ?? options.signal });
      } catch (err) {
        await this.reportSafely(proposal, { ticket, status: "failed", error: errorText(err), arguments: runArgs }, options);
        throw err;
      }
      await this.reportSafely(proposal, { ticket, status: "succeeded", ...resultReport(result, options.maxResultBytes), arguments: runArgs }, options);
      return result;
    };
  }

  /**
   * Proposes a call and waits until it may run: its proposal, ticket and
   * the arguments to run it with, or done (it needs no run: a dry run, or
   * a human-only action the principal performed). Throws the typed errors.
   *
   * @param {ToolDefinition} tool
   * @param {unknown} args
   * @param {GateOptions} [options]
   * @returns {Promise<{done: true, proposal: Proposal} | {done: false, proposal: Proposal, ticket: string, runArgs: unknown}>}
   */
  async permission(tool, args, options = {}) {
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    const signal = options.signal;
    signal?.throwIfAborted();
    const body = {
      tool: tool.name,
      arguments: args ?? {},
      rationale: rationaleOf(tool, args, options.rationale),
      ...(options.declare === false ? {} : { declaration: declarationOf(tool) }),
    };
    /** @type {Record<string, string>} */
    const headers = {};
    if (needsKey(tool)) headers["Idempotency-Key"] = newKey();
    const path = this.scope.conversation
      ? `/api/v1/conversations/${encodeURIComponent(this.scope.conversation)}/tool-calls`
      : `/api/v1/notebooks/${encodeURIComponent(this.scope.notebook ?? "")}/tool-calls`;
    // A lost answer is retried with the same key: Gatehouse answers the
    // first request's outcome and runs nothing twice.
    let answer;
    for (let attempt = 0; ; attempt++) {
      try {
        answer = await this.request("POST", path, body, { headers, signal });
        if (answer.status !== 503 || attempt >= 2 || !headers["Idempotency-Key"]) break;
      } catch (err) {
        if (signal?.aborted || attempt >= 2 || !headers["Idempotency-Key"]) throw err;
      }
      await sleep(250 * 2 ** attempt, signal);
    }
    if (answer.status >= 400) throw refusal(tool.name, answer.status, answer.body);
    /** @type {Proposal} */
    let proposal = answer.body;
    let told = false;
    for (;;) {
      switch (proposal.status) {
        case "applying":
          if (proposal.execution_ticket) {
            const runArgs = proposal.applied_arguments ?? proposal.arguments;
            return { done: false, proposal, ticket: proposal.execution_ticket, runArgs };
          }
          throw new GatehouseError(
            `Gatehouse gave no execution ticket for ${tool.name} (proposal ${proposal.proposal_id}): it may not run from here. Do not run it.`,
            { tool: tool.name, proposal },
          );
        case "applied":
          return { done: true, proposal };
        case "rejected":
          throw new GatehouseRejected(
            `The user rejected the call of ${tool.name} (proposal ${proposal.proposal_id})` +
              (proposal.rejection_reason ? `, saying: "${proposal.rejection_reason}"` : "") +
              `. It did not run. Do not call it again with the same arguments; take the reason into account, or ask the user what to do instead.`,
            { tool: tool.name, proposal, reason: proposal.rejection_reason },
          );
        case "expired":
          throw new GatehouseRejected(
            `Nobody approved the call of ${tool.name} (proposal ${proposal.proposal_id}) before its approval expired. It did not run. ` +
              `Tell the user it needs an approver's decision, or try again later.`,
            { tool: tool.name, proposal },
          );
        case "failed":
          throw new GatehouseError(
            `The call of ${tool.name} (proposal ${proposal.proposal_id}) ended as failed before it ran: ${proposal.error ?? "no reason given"}. Do not run it.`,
            { tool: tool.name, proposal },
          );
      }
      // Waiting for a person: long-poll until the status changes or the
      // time is up.
      if (!told) {
        told = true;
        options.onWaiting?.(proposal);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw waitedTooLong(tool.name, proposal, timeoutMs);
      const wait = Math.max(1, Math.min(30, Math.floor(left / 1000)));
      const seen = encodeURIComponent(proposal.status);
      const got = await this.request("GET", `/api/v1/proposals/${proposal.proposal_id}?wait=${wait}s&status=${seen}`, undefined, {
        signal: anySignal(signal, AbortSignal.timeout(left + 5000)),
      }).catch((err) => {
        if (signal?.aborted) throw err;
        if (Date.now() >= deadline) throw waitedTooLong(tool.name, proposal, timeoutMs);
        throw err;
      });
      if (got.status >= 400) throw refusal(tool.name, got.status, got.body);
      proposal = got.body;
    }
  }

  /**
   * Reports what a call run with its ticket did (POST
   * /api/v1/proposals/{id}/outcome), retrying a lost answer.
   *
   * @param {Proposal} proposal
   * @param {{ticket: string, status: "succeeded" | "failed", result?: unknown, result_digest?: string, error?: string, arguments?: unknown}} report
   * @returns {Promise<Proposal>}
   */
  async report(proposal, report) {
    for (let attempt = 0; ; attempt++) {
      try {
        const { status, body } = await this.request("POST", `/api/v1/proposals/${proposal.proposal_id}/outcome`, report);
        if (status === 200) return body;
        if (status !== 503 || attempt >= 3) {
          throw new GatehouseError(`Gatehouse did not record the outcome of ${proposal.tool} (${status}): ${body?.detail ?? ""}`, {
            tool: proposal.tool,
            proposal,
            problem: body,
            status,
          });
        }
      } catch (err) {
        if (err instanceof GatehouseError || attempt >= 3) throw err;
      }
      await sleep(250 * 2 ** attempt);
    }
  }

  /**
   * @param {Proposal} proposal
   * @param {Parameters<Gatehouse["report"]>[1]} report
   * @param {GateOptions} options
   */
  async reportSafely(proposal, report, options) {
    try {
      await this.report(proposal, report);
    } catch (err) {
      // The tool ran: its result still goes to the model. The call is
      // marked unreported when its ticket expires.
      (options.onReportError ?? ((e) => console.warn("gatehouse: the outcome was not reported:", e)))(err, proposal);
    }
  }

  /**
   * One JSON request with the token.
   *
   * @param {string} method
   * @param {string} path
   * @param {unknown} [body]
   * @param {{headers?: Record<string, string>, signal?: AbortSignal}} [options]
   * @returns {Promise<{status: number, body: any}>}
   */
  async request(method, path, body, options = {}) {
    const res = await this.fetch(this.baseUrl + path, {
      method,
      headers: {
        Authorization: `Bearer ${this.token}`,
        Accept: "application/json",
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
        ...options.headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: options.signal,
    });
    const text = await res.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = { detail: text.slice(0, 500) };
    }
    return { status: res.status, body: parsed };
  }
}

/**
 * gate(tool, fn, options) with the client in the options.
 *
 * @template A, R
 * @param {ToolDefinition} tool
 * @param {(args: A, options?: CallOptions) => Promise<R> | R} fn
 * @param {GateOptions & {gatehouse: Gatehouse}} options
 * @returns {(args: A, callOptions?: CallOptions) => Promise<R>}
 */
export function gate(tool, fn, options) {
  const { gatehouse, ...rest } = options;
  return gatehouse.gate(tool, fn, rest);
}

/** @param {ToolDefinition} tool */
function checkDefinition(tool) {
  if (!tool || typeof tool.name !== "string" || typeof tool.description !== "string" || !tool.effect || !tool.authority) {
    throw new TypeError("gate: a tool definition has name, description, effect and authority");
  }
}

/**
 * @param {ToolDefinition} tool
 * @returns {CallerDeclaration}
 */
function declarationOf(tool) {
  /** @type {CallerDeclaration} */
  const d = { description: tool.description, effect: tool.effect, authority: tool.authority };
  if (tool.actionClass) d.action_class = tool.actionClass;
  if (tool.schema) d.schema = tool.schema;
  return d;
}

/** @param {ToolDefinition} tool */
function needsKey(tool) {
  return tool.authority === "write-non-idempotent" || tool.authority === "irreversible";
}

/** A fresh idempotency key: 32 hex characters. */
function newKey() {
  return globalThis.crypto.randomUUID().replaceAll("-", "");
}

/**
 * @param {ToolDefinition} tool
 * @param {unknown} args
 * @param {GateOptions["rationale"]} given
 */
function rationaleOf(tool, args, given) {
  let text = typeof given === "function" ? given(args) : given;
  if (!text) text = `To ${tool.description.replace(/\.$/, "")} (${tool.name}).`;
  text = text.trim();
  if (text.length < 10) text = `${text} (${tool.name})`;
  return text.length > 500 ? `${text.slice(0, 499)}…` : text;
}

/** @param {CallOptions} o */
function pick(o) {
  /** @type {{signal?: AbortSignal, rationale?: string}} */
  const out = {};
  if (o?.signal) out.signal = o.signal;
  if (o?.rationale) out.rationale = o.rationale;
  return out;
}

/**
 * What to report of a result: the result itself, or its SHA-256 when its
 * JSON is larger than max (or is no JSON).
 *
 * @param {unknown} result
 * @param {number} [max]
 */
function resultReport(result, max) {
  const limit = Math.min(max ?? DEFAULT_MAX_RESULT, SERVER_MAX_RESULT);
  let json;
  try {
    json = JSON.stringify(result === undefined ? null : result);
  } catch {
    json = undefined;
  }
  if (json !== undefined && Buffer.byteLength(json) <= limit) return { result: JSON.parse(json) };
  return { result_digest: sha256Hex(json ?? String(result)) };
}

/** @param {string} text */
function sha256Hex(text) {
  // node:crypto is synchronous and always there on Node.
  return createHash("sha256").update(text).digest("hex");
}

/** @param {unknown} err */
function errorText(err) {
  const text = (err instanceof Error ? err.message : String(err)).trim() || "the tool failed without a message";
  return text.length > 2000 ? `${text.slice(0, 1999)}…` : text;
}

/**
 * A refusal answer as the typed error, its message written for the model.
 *
 * @param {string} tool
 * @param {number} status
 * @param {any} problem
 */
function refusal(tool, status, problem) {
  const detail = String(problem?.detail ?? problem?.title ?? `HTTP ${status}`);
  const fields = Array.isArray(problem?.errors) ? problem.errors.map((/** @type {any} */ e) => e.field) : [];
  const decision = problem?.decision;
  let layer;
  if (decision && Array.isArray(decision.layers)) {
    layer = decision.layers.find((/** @type {any} */ l) => l.state === decision.state)?.layer;
  }
  const info = { tool, problem, status, layer, fields, retryAfter: problem?.retry_after };
  switch (status) {
    case 403:
      return new GatehouseRefused(
        `Gatehouse refused the call of ${tool}${layer ? ` (the ${layer} layer)` : ""}: ${detail} It did not run. ` +
          `Do not call it again with the same arguments; tell the user what was refused and why, or choose another way.`,
        info,
      );
    case 429:
      return new GatehouseRefused(
        `Gatehouse refused the call of ${tool}: it is over its rate limit (${detail}). It did not run. ` +
          (problem?.retry_after ? `Try again in ${problem.retry_after} s, or do without it.` : "Try again later, or do without it."),
        info,
      );
    case 400:
    case 404:
    case 422:
      return new GatehouseRefused(
        `Gatehouse did not accept the call of ${tool}: ${detail}` +
          (fields.length ? ` (${fields.join(", ")})` : "") +
          `. It did not run. Correct the arguments and call it again, or tell the user.`,
        info,
      );
  }
  return new GatehouseError(`Gatehouse could not decide the call of ${tool} (${status}): ${detail} It did not run; try again later.`, info);
}

/**
 * @param {string} tool
 * @param {Proposal} proposal
 * @param {number} timeoutMs
 */
function waitedTooLong(tool, proposal, timeoutMs) {
  const who = proposal.status === "pending_approval" ? "an approver" : "the user";
  const where = proposal.confirm_url ?? proposal.approval_url;
  return new GatehouseTimeout(
    `The call of ${tool} still waits for ${who}'s approval after ${Math.round(timeoutMs / 1000)} s (proposal ${proposal.proposal_id}). ` +
      `It has not run. Tell the user it waits for their decision${where ? ` (${where})` : ""}, and do not assume it ran.`,
    { tool, proposal },
  );
}

/**
 * @param {AbortSignal | undefined} a
 * @param {AbortSignal} b
 */
function anySignal(a, b) {
  return a ? AbortSignal.any([a, b]) : b;
}

/**
 * @param {number} ms
 * @param {AbortSignal} [signal]
 * @returns {Promise<void>}
 */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}
