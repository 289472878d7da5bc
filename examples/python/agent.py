"""A hand-written Python agent loop whose two tools are gated by Gatehouse.

Standard library only: the model is any OpenAI-compatible chat completions
endpoint, the tools run in this process, and clients/python/gatehouse.py
puts each call in front of Gatehouse first. The read (look up an order)
runs at once; the write (refund an order) waits for the owner's approval
of its card, runs once with the execution ticket, and its outcome is
reported. A refusal, a rejection or a wait that runs out reaches the model
as the tool's error.

    GATEHOUSE_URL=http://localhost:8080 GATEHOUSE_TOKEN=<agent token> \\
    GATEHOUSE_CONVERSATION=<conversation id> \\
    OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=... \\
    python3 examples/python/agent.py "Refund order A-1 if it was never shipped"

Without GATEHOUSE_CONVERSATION it starts a conversation of its own. It
prints one JSON line: what its tools ran, and the messages.
"""

import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))

from gatehouse import Gatehouse, GatehouseError  # noqa: E402


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"set {name}")
    return value


if os.environ.get("GATEHOUSE_CONVERSATION"):
    gh = Gatehouse(env("GATEHOUSE_URL"), env("GATEHOUSE_TOKEN"), conversation=os.environ["GATEHOUSE_CONVERSATION"])
else:
    gh = Gatehouse.in_new_conversation(env("GATEHOUSE_URL"), env("GATEHOUSE_TOKEN"), title="Python shop agent")

ran = []  # what the tools did (a real agent would call the shop here)

ORDER = {"type": "object", "required": ["order"], "properties": {"order": {"type": "string", "description": "The order number."}}}
REFUND = {"type": "object", "required": ["order", "amount"],
          "properties": {"order": {"type": "string"}, "amount": {"type": "number", "description": "In euros."}}}


# Each tool is declared to Gatehouse with its call: what it does, its
# effect and its authority class (docs/caller-tools.md).
@gh.gate(name="shop.lookup_order", description="Look up an order in the shop's database.", effect="read", authority="read",
         schema=ORDER, rationale=lambda a: f"the user asked about order {a['order']}")
def lookup_order(order):
    ran.append({"tool": "lookup_order", "order": order})
    return {"order": order, "state": "delivered", "total": 30}


@gh.gate(name="shop.refund", description="Refund an order to the customer's card.", effect="mutate",
         authority="write-non-idempotent", schema=REFUND,
         rationale=lambda a: f"the user asked for a refund of {a['amount']} EUR on order {a['order']}",
         timeout=float(os.environ.get("GATEHOUSE_WAIT_S", "120")),
         on_waiting=lambda p: print(f"waiting for the owner: {p.get('confirm_url') or p.get('approval_url')}", file=sys.stderr))
def refund(order, amount):
    ran.append({"tool": "refund", "order": order, "amount": amount})
    return {"order": order, "refunded": amount}


TOOLS = {"lookup_order": (lookup_order, "Look up an order by its number.", ORDER),
         "refund": (refund, "Refund an amount of an order to the customer.", REFUND)}


def complete(messages):
    """One chat completion (no streaming) with the tools offered."""
    body = {"model": os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"), "messages": messages, "temperature": 0,
            "tools": [{"type": "function", "function": {"name": n, "description": d, "parameters": s}}
                      for n, (_, d, s) in TOOLS.items()]}
    req = urllib.request.Request(env("OPENAI_BASE_URL").rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                 method="POST")
    req.add_header("Authorization", f"Bearer {env('OPENAI_API_KEY')}")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())["choices"][0]["message"]


def run(prompt, max_turns=10):
    messages = [{"role": "user", "content": prompt}]
    for _ in range(max_turns):
        msg = complete(messages)
        messages.append(msg)
        if not msg.get("tool_calls"):
            break
        for call in msg["tool_calls"]:
            fn = TOOLS[call["function"]["name"]][0]
            try:
                content = json.dumps(fn(**json.loads(call["function"]["arguments"] or "{}")))
            except GatehouseError as err:
                content = f"Error: {err}"  # the model reads why, in words it can act on
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return messages


if __name__ == "__main__":
    messages = run(sys.argv[1] if len(sys.argv) > 1 else "Look up order A-1 and refund it.")
    print(json.dumps({"conversation": gh.conversation, "ran": ran, "messages": messages}))
