"""The scripted server in grpcio (C-core), for the reverse direction: a Rust client (the door,
when it exists; a plain tonic client for now) against an implementation nobody here wrote.

Plays the same scenarios as the tonic server (src/server.rs has the table), prints
{"listening": "127.0.0.1:PORT"} on its first line, then one JSON line per attempt with the
same fields, until it is killed.

    python3 scripted_server.py [--max-connection-age-ms N]

--max-connection-age-ms closes each connection gracefully (a GOAWAY) at about N ms old
(C-core's grpc.max_connection_age_ms, which adds ±10 % of jitter).
"""

import argparse
import json
import sys
import threading
import time
from concurrent import futures

import grpc

import stubs

pb2, pb2_grpc = stubs.load()

START = time.monotonic()
LOCK = threading.Lock()
ATTEMPTS = {}


def emit(line):
    with LOCK:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def record(method, context, scenario, call, received):
    with LOCK:
        key = (scenario, call)
        ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
        attempt = ATTEMPTS[key]
    metadata = dict(context.invocation_metadata())
    emit(
        {
            "method": method,
            "scenario": scenario,
            "call": call,
            "attempt": attempt,
            "at_ms": (time.monotonic() - START) * 1000.0,
            "previous_rpc_attempts": metadata.get("grpc-previous-rpc-attempts"),
            "user_agent": metadata.get("user-agent"),
            "received": received,
        }
    )
    return attempt


def split(scenario):
    name, _, param = scenario.partition(":")
    try:
        return name, int(param) if param else 0
    except ValueError:
        return name, 0


def fail(context, code, attempt, extra=()):
    context.set_trailing_metadata((("x-server-attempt", str(attempt)),) + tuple(extra))
    context.abort(code, f"scripted, attempt {attempt}")


def answer(context, scenario, attempt, received):
    name, param = split(scenario)
    if name == "unavailable_then_ok" and attempt <= param:
        fail(context, grpc.StatusCode.UNAVAILABLE, attempt)
    elif name in ("unavailable_then_ok", "ok"):
        pass
    elif name == "pushback":
        if attempt == 1:
            fail(context, grpc.StatusCode.RESOURCE_EXHAUSTED, attempt, (("grpc-retry-pushback-ms", str(param)),))
        elif attempt == 2:
            fail(context, grpc.StatusCode.UNAVAILABLE, attempt)
    elif name == "pushback_stop":
        fail(context, grpc.StatusCode.RESOURCE_EXHAUSTED, attempt, (("grpc-retry-pushback-ms", "-1"),))
    elif name == "internal":
        fail(context, grpc.StatusCode.INTERNAL, attempt)
    elif name == "always_unavailable":
        fail(context, grpc.StatusCode.UNAVAILABLE, attempt)
    elif name == "slow_first":
        if attempt == 1:
            time.sleep(param / 1000.0)
    elif name == "slow":
        time.sleep(param / 1000.0)
    elif name == "later_copy_fails":
        pass
    else:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown scenario {scenario!r} for this method")
    context.set_trailing_metadata((("x-server-attempt", str(attempt)),))
    return pb2.Reply(attempt=attempt, index=0, received=received)


class Scripted(pb2_grpc.ScriptedServicer):
    def Unary(self, request, context):
        attempt = record("Unary", context, request.scenario, request.call, 1)
        return answer(context, request.scenario, attempt, 1)

    def ClientStream(self, request_iterator, context):
        first = next(request_iterator, None)
        received = 1 if first is not None else 0
        first = first or pb2.Request()
        attempt = None
        if split(first.scenario)[0] == "later_copy_fails":
            # Counted at its first message; a later attempt fails there, while the client is
            # still sending.
            attempt = record("ClientStream", context, first.scenario, first.call, 1)
            if attempt > 1:
                fail(context, grpc.StatusCode.UNAVAILABLE, attempt)
        for _ in request_iterator:
            received += 1
        if attempt is None:
            attempt = record("ClientStream", context, first.scenario, first.call, received)
        return answer(context, first.scenario, attempt, received)

    def ServerStream(self, request, context):
        attempt = record("ServerStream", context, request.scenario, request.call, 1)
        name, param = split(request.scenario)
        if name == "stream_fails_after":
            for index in range(param):
                yield pb2.Reply(attempt=attempt, index=index, received=1)
            fail(context, grpc.StatusCode.UNAVAILABLE, attempt)
        elif name == "stream_unavailable_then_ok":
            if attempt <= param:
                fail(context, grpc.StatusCode.UNAVAILABLE, attempt)
            for index in range(3):
                yield pb2.Reply(attempt=attempt, index=index, received=1)
        elif name == "stream_headers_then_error":
            context.send_initial_metadata((("x-server-attempt", str(attempt)),))
            fail(context, grpc.StatusCode.UNAVAILABLE, attempt)
        else:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown scenario {request.scenario!r} for this method")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-connection-age-ms", type=int)
    args = parser.parse_args()
    options = []
    if args.max_connection_age_ms is not None:
        options.append(("grpc.max_connection_age_ms", args.max_connection_age_ms))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=options)
    pb2_grpc.add_ScriptedServicer_to_server(Scripted(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    emit({"listening": f"127.0.0.1:{port}"})
    server.wait_for_termination()


if __name__ == "__main__":
    main()
