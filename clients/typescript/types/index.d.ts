/**
 * gate(tool, fn, options) with the client in the options.
 *
 * @template A, R
 * @param {ToolDefinition} tool
 * @param {(args: A, options?: CallOptions) => Promise<R> | R} fn
 * @param {GateOptions & {gatehouse: Gatehouse}} options
 * @returns {(args: A, callOptions?: CallOptions) => Promise<R>}
 */
export function gate<A, R>(tool: ToolDefinition, fn: (args: A, options?: CallOptions) => Promise<R> | R, options: GateOptions & {
    gatehouse: Gatehouse;
}): (args: A, callOptions?: CallOptions) => Promise<R>;
/** Every error of this client. */
export class GatehouseError extends Error {
    /**
     * @param {string} message
     * @param {{tool?: string, proposal?: Proposal, problem?: Problem, status?: number}} [info]
     */
    constructor(message: string, info?: {
        tool?: string;
        proposal?: Proposal;
        problem?: Problem;
        status?: number;
    });
    /** The tool's name. */
    tool: string | undefined;
    /** The call as Gatehouse recorded it, when it was recorded. */
    proposal: {
        proposal_id: string;
        conversation_id?: string;
        notebook_id?: string;
        tool: string;
        effect: "read" | "mutate" | "destructive";
        arguments: Record<string, never>;
        applied_arguments?: Record<string, never>;
        rationale: string;
        status: "pending" | "pending_approval" | "applying" | "applied" | "rejected" | "failed" | "expired";
        disposition: "auto-run" | "auto-apply" | "propose" | "auto" | "confirm" | "gated";
        permission_mode?: "approve" | "auto";
        trust_level?: "cautious" | "trusted" | "autonomous";
        result?: unknown;
        error?: string;
        rejection_reason?: string;
        apply_path?: "auto" | "human" | "approval";
        confirm_url?: string;
        authority?: "read" | "write-idempotent" | "write-non-idempotent" | "irreversible";
        risk?: "low" | "medium" | "high";
        action_class?: string;
        decision?: import("../types/openapi.js").components["schemas"]["Decision"];
        effect_decision?: import("../types/openapi.js").components["schemas"]["Decision"];
        approver_role?: string;
        dry_run?: boolean;
        requires_human_approval?: boolean;
        approval_id?: string;
        approval_url?: string;
        summary?: string;
        ttl_seconds?: number;
        approvals_needed?: number;
        escalated_to?: string;
        escalated_at?: string;
        confirm_ignored?: string;
        outcome_unknown?: boolean;
        note?: string;
        created_at: string;
        execution_ticket?: string;
        ticket_expires_at?: string;
        declaration?: import("../types/openapi.js").components["schemas"]["CallerDeclaration"];
    } | undefined;
    /** The problem document Gatehouse answered, for a refusal. */
    problem: ({
        type: string;
        title: string;
        status: number;
        detail: string;
        code: string;
        decision?: import("../types/openapi.js").components["schemas"]["Decision"];
        constraint?: string;
        proposal_id?: string;
        retry_after?: number;
        outcome_unknown?: boolean;
        request_id?: string;
        errors?: {
            field: string;
            message: string;
        }[];
    } & {
        [key: string]: unknown;
    }) | undefined;
    /** The HTTP status, for a refusal. */
    status: number | undefined;
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
    constructor(message: string, info?: {
        tool?: string;
        proposal?: Proposal;
        problem?: Problem;
        status?: number;
        layer?: string;
        fields?: string[];
        retryAfter?: number;
    });
    /** The decision layer that refused it, when one did. */
    layer: string | undefined;
    /** The fields at fault, for input Gatehouse does not accept. */
    fields: string[];
    /** Seconds to wait before trying again, for a rate limit. */
    retryAfter: number | undefined;
}
/** A person rejected the call, or nobody approved it in time. The tool did not run. */
export class GatehouseRejected extends GatehouseError {
    /**
     * @param {string} message
     * @param {{tool?: string, proposal?: Proposal, reason?: string}} [info]
     */
    constructor(message: string, info?: {
        tool?: string;
        proposal?: Proposal;
        reason?: string;
    });
    /** The reason the person gave (the model may read it). */
    reason: string | undefined;
}
/** The call still waits for a person after the timeout. The tool did not run. */
export class GatehouseTimeout extends GatehouseError {
    /**
     * @param {string} message
     * @param {{tool?: string, proposal?: Proposal}} [info]
     */
    constructor(message: string, info?: {
        tool?: string;
        proposal?: Proposal;
    });
}
/** The client of one Gatehouse, for one scope (a conversation or a notebook). */
export class Gatehouse {
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
    static inNewConversation({ baseUrl, token, title, fetch: fetchImpl }: {
        baseUrl: string;
        token: string;
        title?: string | undefined;
        fetch?: typeof fetch | undefined;
    }): Promise<Gatehouse>;
    /**
     * @param {object} options
     * @param {string} options.baseUrl Such as https://gatehouse.example.com.
     * @param {string} options.token An API token (an agent token for an agent).
     * @param {{conversation?: string, notebook?: string}} options.scope Where the calls are proposed.
     * @param {typeof fetch} [options.fetch]
     */
    constructor({ baseUrl, token, scope, fetch: fetchImpl }: {
        baseUrl: string;
        token: string;
        scope: {
            conversation?: string;
            notebook?: string;
        };
        fetch?: typeof fetch | undefined;
    });
    baseUrl: string;
    token: string;
    scope: {
        conversation?: string;
        notebook?: string;
    };
    fetch: typeof fetch;
    /**
     * Wraps an async tool function: see the module's comment.
     *
     * @template A, R
     * @param {ToolDefinition} tool
     * @param {(args: A, options?: CallOptions) => Promise<R> | R} fn
     * @param {GateOptions} [options]
     * @returns {(args: A, callOptions?: CallOptions) => Promise<R>}
     */
    gate<A, R>(tool: ToolDefinition, fn: (args: A, options?: CallOptions) => Promise<R> | R, options?: GateOptions): (args: A, callOptions?: CallOptions) => Promise<R>;
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
    permission(tool: ToolDefinition, args: unknown, options?: GateOptions): Promise<{
        done: true;
        proposal: Proposal;
    } | {
        done: false;
        proposal: Proposal;
        ticket: string;
        runArgs: unknown;
    }>;
    /**
     * Reports what a call run with its ticket did (POST
     * /api/v1/proposals/{id}/outcome), retrying a lost answer.
     *
     * @param {Proposal} proposal
     * @param {{ticket: string, status: "succeeded" | "failed", result?: unknown, result_digest?: string, error?: string, arguments?: unknown}} report
     * @returns {Promise<Proposal>}
     */
    report(proposal: Proposal, report: {
        ticket: string;
        status: "succeeded" | "failed";
        result?: unknown;
        result_digest?: string;
        error?: string;
        arguments?: unknown;
    }): Promise<Proposal>;
    /**
     * @param {Proposal} proposal
     * @param {Parameters<Gatehouse["report"]>[1]} report
     * @param {GateOptions} options
     */
    reportSafely(proposal: Proposal, report: Parameters<Gatehouse["report"]>[1], options: GateOptions): Promise<void>;
    /**
     * One JSON request with the token.
     *
     * @param {string} method
     * @param {string} path
     * @param {unknown} [body]
     * @param {{headers?: Record<string, string>, signal?: AbortSignal}} [options]
     * @returns {Promise<{status: number, body: any}>}
     */
    request(method: string, path: string, body?: unknown, options?: {
        headers?: Record<string, string>;
        signal?: AbortSignal;
    }): Promise<{
        status: number;
        body: any;
    }>;
}
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
 */
export type Proposal = import("../types/openapi.js").components["schemas"]["Proposal"];
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
 */
export type Problem = import("../types/openapi.js").components["schemas"]["Problem"];
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
 */
export type CallerDeclaration = import("../types/openapi.js").components["schemas"]["CallerDeclaration"];
/**
 * A tool as its agent declares it to Gatehouse.
 */
export type ToolDefinition = {
    /**
     * Dot notation, such as `shop.lookup_order`; not a tool Gatehouse runs.
     */
    name: string;
    /**
     * What the tool does, shown to the person who may be asked.
     */
    description: string;
    effect: "read" | "mutate" | "destructive";
    /**
     *   Fits the effect; write-non-idempotent and irreversible calls get an idempotency key per invocation.
     */
    authority: "read" | "write-idempotent" | "write-non-idempotent" | "irreversible";
    /**
     * A registered action class (by default read.context for a read, tool.call.local for a change).
     */
    actionClass?: string | undefined;
    /**
     * The JSON Schema of the arguments (type: object).
     */
    schema?: Record<string, unknown> | undefined;
};
export type GateOptions = {
    /**
     * Why the call is made (10 to 500 characters); by default the tool's description.
     */
    rationale?: string | ((args: any) => string) | undefined;
    /**
     * How long to wait for a person before GatehouseTimeout (default 120000).
     */
    timeoutMs?: number | undefined;
    /**
     * Stops the wait (the call then does not run).
     */
    signal?: AbortSignal | undefined;
    /**
     * Send the declaration with each call (default true; false for a tool the policy file declares).
     */
    declare?: boolean | undefined;
    /**
     * A result larger than this (its JSON) is reported as its SHA-256 (default 65536).
     */
    maxResultBytes?: number | undefined;
    /**
     * Told when the outcome could not be reported (default: console.warn).
     */
    onReportError?: ((err: unknown, proposal: Proposal) => void) | undefined;
    /**
     * Told once when the call waits for a person (its confirm_url or approval_url says where).
     */
    onWaiting?: ((proposal: Proposal) => void) | undefined;
};
/**
 * What a wrapped tool is called with besides its arguments: LangChain's
 * RunnableConfig fits (its signal is honoured).
 */
export type CallOptions = {
    signal?: AbortSignal | undefined;
    rationale?: string | undefined;
};
