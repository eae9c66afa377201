"""The grpcio client driver: runs one scenario's calls against a target with a service config,
and prints what the application saw as one JSON object.

    python3 client.py --target 127.0.0.1:PORT --method unary --scenario unavailable_then_ok:3 \
        --calls 3 --config '{"methodConfig": [...]}' [--timeout 2.0] [--wait-for-ready]

Output: {"grpcio": VERSION, "calls": [{"call", "code", "details", "started_ms", "elapsed_ms",
"replies": [{"attempt", "index", "received"}], "initial_metadata", "trailing_metadata"}]}.
Pauses and attempts are what the server saw (it reports them itself); this side reports the
statuses, the messages the application received and how long each call took.
"""

import argparse
import json
import sys
import time

import grpc

import stubs


def metadata_dict(metadata):
    return {key: value for key, value in (metadata or ()) if not isinstance(value, bytes)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--method", choices=["unary", "client_stream", "server_stream"], default="unary")
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--config", default="{}")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--wait-for-ready", action="store_true")
    parser.add_argument("--messages", type=int, default=3, help="requests per client stream")
    args = parser.parse_args()

    pb2, pb2_grpc = stubs.load()
    options = [
        ("grpc.enable_retries", 1),
        ("grpc.service_config", args.config),
        # The config above is the channel's; no resolver may replace it.
        ("grpc.service_config_disable_resolution", 1),
    ]
    channel = grpc.insecure_channel(args.target, options=options)
    stub = pb2_grpc.ScriptedStub(channel)
    origin = time.monotonic()
    calls = []
    for call in range(args.calls):
        request = pb2.Request(scenario=args.scenario, call=call)
        started = time.monotonic()
        record = {"call": call, "code": "OK", "details": "", "replies": [], "initial_metadata": {}, "trailing_metadata": {}}
        kwargs = {"timeout": args.timeout, "wait_for_ready": True if args.wait_for_ready else None}
        try:
            if args.method == "unary":
                reply, rpc = stub.Unary.with_call(request, **kwargs)
                record["replies"].append({"attempt": reply.attempt, "index": reply.index, "received": reply.received})
                record["initial_metadata"] = metadata_dict(rpc.initial_metadata())
                record["trailing_metadata"] = metadata_dict(rpc.trailing_metadata())
            elif args.method == "client_stream":
                requests = iter([request] * args.messages)
                reply, rpc = stub.ClientStream.with_call(requests, **kwargs)
                record["replies"].append({"attempt": reply.attempt, "index": reply.index, "received": reply.received})
                record["trailing_metadata"] = metadata_dict(rpc.trailing_metadata())
            else:
                responses = stub.ServerStream(request, **kwargs)
                for reply in responses:
                    record["replies"].append({"attempt": reply.attempt, "index": reply.index, "received": reply.received})
                record["trailing_metadata"] = metadata_dict(responses.trailing_metadata())
        except grpc.RpcError as error:
            record["code"] = error.code().name
            record["details"] = error.details() or ""
            record["trailing_metadata"] = metadata_dict(error.trailing_metadata())
        record["started_ms"] = (started - origin) * 1000.0
        record["elapsed_ms"] = (time.monotonic() - started) * 1000.0
        calls.append(record)
    channel.close()
    json.dump({"grpcio": grpc.__version__, "calls": calls}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
