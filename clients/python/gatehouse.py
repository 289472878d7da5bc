"""Gate the tools a Python agent runs itself behind Gatehouse.

Standard library only. ``Gatehouse(...).gate(tool)`` (or the ``gate``
decorator) wraps a tool function: each call is proposed to Gatehouse with
the tool's declaration, waits (long-poll) while a person decides, runs only
with an execution ticket and with exactly the arguments the ticket allows
(the owner's edit, if any), and reports the outcome (the result, or its
SHA-256 when large; or the error). A refusal, a rejection or a wait that
runs out raises GatehouseRefused, GatehouseRejected or GatehouseTimeout,
whose message is written for the model to read.

    gh = Gatehouse("http://localhost:8080", token, conversation=conv_id)

    @gh.gate(name="shop.refund", description="Refund an order.",
             effect="mutate", authority="write-non-idempotent",
             rationale=lambda args: f"the user asked to refund {args['order']}")
    def refund(order: str, amount: float) -> dict:
        ...

    refund(order="A-1", amount=30)   # proposes, waits, runs, reports

See docs/caller-tools.md and docs/gate-your-own-tools.md.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Callable, Optional

__all__ = [
    "Gatehouse",
    "GatehouseError",
    "GatehouseRefused",
    "GatehouseRejected",
    "GatehouseTimeout",
    "gate",
]

DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_RESULT = 64 << 10
SERVER_MAX_RESULT = 256 << 10


class GatehouseError(Exception):
    """Every error of this client."""

    def __init__(self, message: str, *, tool: str = "", proposal: Optional[dict] = None,
                 problem: Optional[dict] = None, status: int = 0):
        super().__init__(message)
        self.tool = tool
        self.proposal = proposal
        self.problem = problem
        self.status = status


class GatehouseRefused(GatehouseError):
    """Gatehouse refused the call (a decision layer, a rate limit, or input
    it does not accept). The tool did not run."""

    def __init__(self, message: str, *, layer: str = "", fields: Optional[list] = None,
                 retry_after: Optional[int] = None, **kw: Any):
        super().__init__(message, **kw)
        self.layer = layer
        self.fields = fields or []
        self.retry_after = retry_after


class GatehouseRejected(GatehouseError):
    """A person rejected the call, or nobody approved it in time. The tool
    did not run."""

    def __init__(self, message: str, *, reason: str = "", **kw: Any):
        super().__init__(message, **kw)
        self.reason = reason


class GatehouseTimeout(GatehouseError):
    """The call still waits for a person after the timeout. The tool did
    not run."""


class Gatehouse:
    """The client of one Gatehouse, for one scope (a conversation or a
    notebook)."""

    def __init__(self, base_url: str, token: str, *, conversation: str = "", notebook: str = ""):
        if bool(conversation) == bool(notebook):
            raise ValueError("Gatehouse: name exactly one of conversation and notebook")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.conversation = conversation
        self.notebook = notebook

    @classmethod
    def in_new_conversation(cls, base_url: str, token: str, title: str = "Agent") -> "Gatehouse":
        """A client in a new conversation of the token's user."""
        probe = cls(base_url, token, conversation="-")
        status, body = probe._request("POST", "/api/v1/conversations", {"title": title})
        if status != 201:
            raise GatehouseError(f"Gatehouse: could not start a conversation ({status}): {body.get('detail', '')}")
        return cls(base_url, token, conversation=body["id"])

    # The decorator.

    def gate(self, *, name: str, description: str, effect: str, authority: str,
             action_class: str = "", schema: Optional[dict] = None,
             rationale: Any = None, timeout: float = DEFAULT_TIMEOUT, declare: bool = True,
             max_result_bytes: int = DEFAULT_MAX_RESULT,
             on_waiting: Optional[Callable[[dict], None]] = None) -> Callable:
        """Wraps a tool function (called with keyword arguments, or one
        dict). ``rationale`` is a string or a function of the arguments
        (10 to 500 characters: why the call is made); ``timeout`` is how
        long to wait for a person, in seconds; ``on_waiting`` is told once
        when the call waits (its ``confirm_url`` says where)."""
        tool = {"name": name, "description": description, "effect": effect, "authority": authority,
                "action_class": action_class, "schema": schema}

        def wrap(fn: Callable) -> Callable:
            single_dict = _takes_one_dict(fn)

            @functools.wraps(fn)
            def gated(*args: Any, **kwargs: Any) -> Any:
                if args and len(args) == 1 and isinstance(args[0], dict) and not kwargs:
                    arguments = dict(args[0])
                elif args:
                    raise TypeError(f"{name}: call it with keyword arguments or one dict")
                else:
                    arguments = kwargs
                done, proposal, ticket, run_args = self.permission(
                    tool, arguments, rationale=rationale, timeout=timeout, declare=declare, on_waiting=on_waiting)
                if done:
                    return proposal.get("result")
                try:
                    result = fn(run_args) if single_dict else fn(**run_args)
                except Exception as err:  # reported, then raised again
                    self._report_safely(proposal, {"ticket": ticket, "status": "failed", "error": _error_text(err),
                                                   "arguments": run_args})
                    raise
                report = {"ticket": ticket, "status": "succeeded", "arguments": run_args}
                report.update(_result_report(result, max_result_bytes))
                self._report_safely(proposal, report)
                return result

            gated.gatehouse_tool = tool  # type: ignore[attr-defined]
            return gated

        return wrap

    # The steps.

    def permission(self, tool: dict, arguments: dict, *, rationale: Any = None, timeout: float = DEFAULT_TIMEOUT,
                   declare: bool = True, on_waiting: Optional[Callable[[dict], None]] = None):
        """Proposes the call and waits until it may run. Returns (done,
        proposal, ticket, arguments to run): done when nothing is to run
        (a dry run). Raises the typed errors."""
        deadline = time.monotonic() + timeout
        name = tool["name"]
        body: dict = {"tool": name, "arguments": arguments, "rationale": _rationale(tool, arguments, rationale)}
        if declare:
            body["declaration"] = _declaration(tool)
        headers = {}
        if tool["authority"] in ("write-non-idempotent", "irreversible"):
            headers["Idempotency-Key"] = uuid.uuid4().hex
        path = (f"/api/v1/conversations/{urllib.parse.quote(self.conversation)}/tool-calls" if self.conversation
                else f"/api/v1/notebooks/{urllib.parse.quote(self.notebook)}/tool-calls")
        for attempt in range(3):
            try:
                status, proposal = self._request("POST", path, body, headers=headers)
            except (urllib.error.URLError, OSError):
                if attempt == 2 or not headers:
                    raise
                time.sleep(0.25 * 2 ** attempt)
                continue
            if status != 503 or not headers or attempt == 2:
                break
            time.sleep(0.25 * 2 ** attempt)
        if status >= 400:
            raise _refusal(name, status, proposal)
        told = False
        while True:
            st = proposal.get("status")
            pid = proposal.get("proposal_id")
            if st == "applying":
                ticket = proposal.get("execution_ticket")
                if not ticket:
                    raise GatehouseError(f"Gatehouse gave no execution ticket for {name} (proposal {pid}): "
                                         "it may not run from here. Do not run it.", tool=name, proposal=proposal)
                run_args = proposal.get("applied_arguments") or proposal.get("arguments") or {}
                return False, proposal, ticket, run_args
            if st == "applied":
                return True, proposal, "", {}
            if st == "rejected":
                reason = proposal.get("rejection_reason", "")
                said = f', saying: "{reason}"' if reason else ""
                raise GatehouseRejected(
                    f"The user rejected the call of {name} (proposal {pid}){said}. It did not run. Do not call it again "
                    "with the same arguments; take the reason into account, or ask the user what to do instead.",
                    reason=reason, tool=name, proposal=proposal)
            if st == "expired":
                raise GatehouseRejected(
                    f"Nobody approved the call of {name} (proposal {pid}) before its approval expired. It did not run. "
                    "Tell the user it needs an approver's decision, or try again later.", tool=name, proposal=proposal)
            if st == "failed":
                raise GatehouseError(f"The call of {name} (proposal {pid}) ended as failed before it ran: "
                                     f"{proposal.get('error', 'no reason given')}. Do not run it.", tool=name, proposal=proposal)
            if not told:
                told = True
                if on_waiting:
                    on_waiting(proposal)
            left = deadline - time.monotonic()
            if left <= 0:
                raise _waited_too_long(name, proposal, timeout)
            wait = max(1, min(30, int(left)))
            status, proposal = self._request(
                "GET", f"/api/v1/proposals/{pid}?wait={wait}s&status={urllib.parse.quote(st or '')}", None, timeout=wait + 10)
            if status >= 400:
                raise _refusal(name, status, proposal)

    def report(self, proposal: dict, report: dict) -> dict:
        """Reports what a call run with its ticket did, retrying a lost
        answer."""
        for attempt in range(4):
            try:
                status, body = self._request("POST", f"/api/v1/proposals/{proposal['proposal_id']}/outcome", report)
            except (urllib.error.URLError, OSError):
                if attempt == 3:
                    raise
                time.sleep(0.25 * 2 ** attempt)
                continue
            if status == 200:
                return body
            if status != 503 or attempt == 3:
                raise GatehouseError(f"Gatehouse did not record the outcome of {proposal.get('tool')} ({status}): "
                                     f"{body.get('detail', '')}", tool=proposal.get("tool", ""), proposal=proposal,
                                     problem=body, status=status)
            time.sleep(0.25 * 2 ** attempt)
        raise AssertionError("unreachable")

    def _report_safely(self, proposal: dict, report: dict) -> None:
        try:
            self.report(proposal, report)
        except Exception as err:  # the tool ran: its result still goes to the caller
            import warnings
            warnings.warn(f"gatehouse: the outcome of proposal {proposal.get('proposal_id')} was not reported: {err}")

    def _request(self, method: str, path: str, body: Any, *, headers: Optional[dict] = None,
                 timeout: float = 30) -> tuple:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = {"detail": raw[:500].decode(errors="replace")}
        return status, parsed


def gate(gatehouse: Gatehouse, **definition: Any) -> Callable:
    """``@gate(gh, name=..., ...)``: Gatehouse.gate with the client named."""
    return gatehouse.gate(**definition)


def _takes_one_dict(fn: Callable) -> bool:
    """Whether fn takes its arguments as one positional dict (def tool(args))
    rather than as keywords."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    return (len(params) == 1 and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD)
            and params[0].annotation in (dict, "dict", inspect.Parameter.empty) and params[0].name in ("args", "arguments"))


def _declaration(tool: dict) -> dict:
    d = {"description": tool["description"], "effect": tool["effect"], "authority": tool["authority"]}
    if tool.get("action_class"):
        d["action_class"] = tool["action_class"]
    if tool.get("schema"):
        d["schema"] = tool["schema"]
    return d


def _rationale(tool: dict, arguments: dict, given: Any) -> str:
    text = given(arguments) if callable(given) else given
    if not text:
        text = f"To {tool['description'].rstrip('.')} ({tool['name']})."
    text = str(text).strip()
    if len(text) < 10:
        text = f"{text} ({tool['name']})"
    return text if len(text) <= 500 else text[:499] + "…"


def _result_report(result: Any, max_bytes: int) -> dict:
    limit = min(max_bytes, SERVER_MAX_RESULT)
    try:
        text = json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        text = None
    if text is not None and len(text.encode()) <= limit:
        return {"result": result}
    return {"result_digest": hashlib.sha256((text if text is not None else repr(result)).encode()).hexdigest()}


def _error_text(err: BaseException) -> str:
    text = str(err).strip() or f"the tool failed ({type(err).__name__})"
    return text if len(text) <= 2000 else text[:1999] + "…"


def _refusal(tool: str, status: int, problem: dict) -> GatehouseError:
    detail = str(problem.get("detail") or problem.get("title") or f"HTTP {status}")
    fields = [e.get("field", "") for e in problem.get("errors") or [] if isinstance(e, dict)]
    decision = problem.get("decision") or {}
    layer = ""
    for lyr in decision.get("layers") or []:
        if lyr.get("state") == decision.get("state"):
            layer = lyr.get("layer", "")
            break
    kw = dict(tool=tool, problem=problem, status=status, layer=layer, fields=fields, retry_after=problem.get("retry_after"))
    if status == 403:
        by = f" (the {layer} layer)" if layer else ""
        return GatehouseRefused(f"Gatehouse refused the call of {tool}{by}: {detail} It did not run. Do not call it again "
                                "with the same arguments; tell the user what was refused and why, or choose another way.", **kw)
    if status == 429:
        when = f"Try again in {problem['retry_after']} s, or do without it." if problem.get("retry_after") else "Try again later."
        return GatehouseRefused(f"Gatehouse refused the call of {tool}: it is over its rate limit ({detail}). It did not run. {when}", **kw)
    if status in (400, 404, 422):
        named = f" ({', '.join(fields)})" if fields else ""
        return GatehouseRefused(f"Gatehouse did not accept the call of {tool}: {detail}{named}. It did not run. "
                                "Correct the arguments and call it again, or tell the user.", **kw)
    return GatehouseError(f"Gatehouse could not decide the call of {tool} ({status}): {detail} It did not run; try again later.",
                          tool=tool, problem=problem, status=status)


def _waited_too_long(tool: str, proposal: dict, timeout: float) -> GatehouseTimeout:
    who = "an approver" if proposal.get("status") == "pending_approval" else "the user"
    where = proposal.get("confirm_url") or proposal.get("approval_url")
    at = f" ({where})" if where else ""
    return GatehouseTimeout(
        f"The call of {tool} still waits for {who}'s approval after {round(timeout)} s (proposal {proposal.get('proposal_id')}). "
        f"It has not run. Tell the user it waits for their decision{at}, and do not assume it ran.",
        tool=tool, proposal=proposal)
