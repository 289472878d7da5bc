"""gatehouse.py against a real Gatehouse.

    python3 test_gatehouse.py URL AGENT_TOKEN OWNER_TOKEN

web/python_gate_test.go starts a Gatehouse and runs this; the owner's user
token confirms, edits and rejects the agent's cards. It prints
"N passed, N failed" and exits 1 on a failure.
"""

import json
import sys
import traceback
import urllib.error
import urllib.request

sys.path.insert(0, __file__.rsplit("/", 1)[0] or ".")

from gatehouse import Gatehouse, GatehouseRefused, GatehouseRejected, GatehouseTimeout  # noqa: E402

URL, AGENT, OWNER = sys.argv[1], sys.argv[2], sys.argv[3]


def as_owner(method, path, body=None):
    req = urllib.request.Request(URL + path, data=None if body is None else json.dumps(body).encode(), method=method)
    req.add_header("Authorization", f"Bearer {OWNER}")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def in_conversation(mode):
    gh = Gatehouse.in_new_conversation(URL, AGENT, title=f"gatehouse.py {mode}")
    if mode != "approve":
        status, _ = as_owner("PATCH", f"/api/v1/conversations/{gh.conversation}", {"permission_mode": mode})
        assert status == 200, status
    return gh


LOOKUP = dict(name="shop.lookup_order", description="Look up an order in the shop's database.", effect="read", authority="read",
              schema={"type": "object", "required": ["order"], "properties": {"order": {"type": "string"}}})
REFUND = dict(name="shop.refund", description="Refund an order to the customer's card.", effect="mutate",
              authority="write-non-idempotent",
              schema={"type": "object", "required": ["order", "amount"],
                      "properties": {"order": {"type": "string"}, "amount": {"type": "number"}}})


def why(args):
    return f"the customer asked about order {args['order']}"


def test_a_read_runs_at_once_and_is_reported():
    gh = in_conversation("approve")
    ran = []

    @gh.gate(**LOOKUP, rationale=why)
    def lookup_order(order):
        ran.append(order)
        return {"order": order, "state": "shipped"}

    assert lookup_order(order="A-1") == {"order": "A-1", "state": "shipped"}
    assert ran == ["A-1"]


def test_a_write_waits_for_the_owner_and_runs_with_their_edit():
    gh = in_conversation("approve")
    ran, seen = [], []

    def owner_edits(proposal):
        seen.append(proposal)
        assert not ran, "nothing runs before the owner confirms"
        status, _ = as_owner("POST", f"/api/v1/proposals/{proposal['proposal_id']}/apply",
                             {"arguments": {"order": "A-2", "amount": 100}})
        assert status == 202, status

    @gh.gate(**REFUND, rationale=why, on_waiting=owner_edits)
    def refund(args):
        ran.append(args)
        return {"refunded": args["amount"]}

    assert refund({"order": "A-2", "amount": 120}) == {"refunded": 100}
    assert ran == [{"order": "A-2", "amount": 100}]
    assert seen[0]["status"] == "pending"
    status, done = as_owner("GET", f"/api/v1/proposals/{seen[0]['proposal_id']}")
    assert done["status"] == "applied" and done["result"] == {"refunded": 100}, done


def test_a_rejection_raises_gatehouse_rejected():
    gh = in_conversation("approve")

    def owner_rejects(proposal):
        as_owner("POST", f"/api/v1/proposals/{proposal['proposal_id']}/reject", {"reason": "that order was refunded already"})

    @gh.gate(**REFUND, rationale=why, on_waiting=owner_rejects)
    def refund(order, amount):
        raise AssertionError("must not run")

    try:
        refund(order="A-3", amount=5)
    except GatehouseRejected as err:
        assert err.reason == "that order was refunded already"
        assert "rejected the call of shop.refund" in str(err) and "It did not run" in str(err), str(err)
    else:
        raise AssertionError("no GatehouseRejected")


def test_a_wait_that_runs_out_raises_gatehouse_timeout():
    gh = in_conversation("approve")

    @gh.gate(**REFUND, rationale=why, timeout=1.5)
    def refund(order, amount):
        raise AssertionError("must not run")

    try:
        refund(order="A-4", amount=5)
    except GatehouseTimeout as err:
        assert "still waits for the user's approval" in str(err) and "has not run" in str(err), str(err)
    else:
        raise AssertionError("no GatehouseTimeout")


def test_a_refusal_raises_gatehouse_refused_naming_the_field():
    gh = in_conversation("auto")

    @gh.gate(name="records.put", description="Put a record.", effect="mutate", authority="write-idempotent")
    def put(collection, key, value):
        raise AssertionError("must not run")

    try:
        put(collection="c", key="k", value=1)
    except GatehouseRefused as err:
        assert err.status == 422 and err.fields == ["tool"], (err.status, err.fields)
        assert "did not accept the call of records.put" in str(err), str(err)
    else:
        raise AssertionError("no GatehouseRefused")


def test_a_failure_is_reported_and_raised_and_a_large_result_goes_as_its_digest():
    gh = in_conversation("auto")

    @gh.gate(**LOOKUP, rationale=why)
    def flaky(order):
        raise RuntimeError("the shop database timed out")

    try:
        flaky(order="A-6")
    except RuntimeError as err:
        assert str(err) == "the shop database timed out"
    else:
        raise AssertionError("the error was swallowed")

    @gh.gate(**LOOKUP, rationale=why, max_result_bytes=1024)
    def big(order):
        return {"blob": "x" * 100_000}

    assert len(big(order="A-7")["blob"]) == 100_000


if __name__ == "__main__":
    passed = failed = 0
    for name, fn in list(globals().items()):
        if name.startswith("test_") and callable(fn):
            try:
                fn()
                passed += 1
                print(f"ok {name}")
            except Exception:  # noqa: BLE001 - report every failure
                failed += 1
                print(f"FAIL {name}")
                traceback.print_exc()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
