"""Drives `agent-rsh mcp` with the official MCP Python SDK, as an agent would.

Usage: python mcp_client.py AGENT_RSH_BINARY POLICY_FILE

Connects twice: once with the 2025-11-25 initialize handshake and once
with the SDK's automatic era detection (server/discover, then 2026-07-28
requests). Each time it lists the tools, runs `echo hi`, runs a denied
command, runs a printing command with a progress callback, and spawns a
background job that it reads through status, output and grep, feeds one
through send and kills another, then takes every tool's error paths (the
SDK checks each successful structuredContent against the tool's
outputSchema; every result, errors included, is validated here with
jsonschema as well). Prints
"ok: <mode> <protocol version>" per mode; any failed check raises.
"""

import asyncio
import sys

import jsonschema
from mcp import Client, StdioServerParameters

BINARY, POLICY = sys.argv[1], sys.argv[2]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


async def session(mode: str) -> str:
    server = StdioServerParameters(command=BINARY, args=["mcp", "--policy", POLICY])
    async with Client(server, mode=mode, raise_exceptions=True) as client:
        version = client.protocol_version
        check(client.server_info is not None and client.server_info.name == "agent-rsh",
              f"server info: {client.server_info!r}")

        tools = (await client.list_tools()).tools
        schemas = {t.name: t.output_schema for t in tools}
        plain_call = client.call_tool

        async def call_tool(name, args, **kw):
            r = await plain_call(name, args, **kw)
            check(r.structured_content is not None, f"{name}: no structuredContent: {r!r}")
            jsonschema.validate(r.structured_content, schemas[name])
            return r

        client.call_tool = call_tool

        async def fails(name, args, needle):
            r = await call_tool(name, args)
            check(r.is_error, f"{name} {args} was not an error: {r!r}")
            check(needle in r.content[0].text, f"{name} {args}: {r.content[0].text!r} lacks {needle!r}")
            return r
        run = next((t for t in tools if t.name == "run"), None)
        check(run is not None, f"no run tool in {[t.name for t in tools]}")
        check(run.input_schema["required"] == ["command"], f"inputSchema: {run.input_schema}")
        check(run.output_schema is not None, "run has no outputSchema")
        check(run.annotations.destructive_hint is True and run.annotations.read_only_hint is False,
              f"annotations: {run.annotations!r}")

        ok = await client.call_tool("run", {"command": "echo hi"})
        check(not ok.is_error, f"echo hi failed: {ok!r}")
        check(ok.structured_content["exitCode"] == 0, f"structuredContent: {ok.structured_content}")
        check(ok.structured_content["stdout"] == "hi\n", f"stdout: {ok.structured_content}")
        text = ok.content[0].text
        check(text.startswith("exit code 0") and "\nhi\n" in text, f"text: {text!r}")

        denied = await client.call_tool("run", {"command": "rm -rf /"})
        check(denied.is_error, f"rm was not an error: {denied!r}")
        check("command.not-allowed" in denied.content[0].text, f"text: {denied.content[0].text!r}")
        check("hint:" in denied.content[0].text, f"text: {denied.content[0].text!r}")

        seen = []

        async def on_progress(progress, total, message):
            seen.append((progress, message))

        printed = await client.call_tool(
            "run",
            {"command": "bash -c 'echo one; sleep 0.3; echo two'"},
            progress_callback=on_progress,
        )
        check(not printed.is_error, f"printing run failed: {printed!r}")
        messages = "".join(m or "" for _, m in seen)
        check("one" in messages and "two" in messages, f"progress: {seen}")
        values = [p for p, _ in seen]
        check(values == sorted(values) and len(set(values)) == len(values), f"progress values: {values}")
        names = [t.name for t in tools]
        check(names == ["run", "spawn", "status", "output", "grep", "send", "kill"], f"tools: {names}")
        for t in tools:
            check(t.output_schema is not None, f"{t.name} has no outputSchema")
            destructive = t.name in ("run", "spawn", "send", "kill")
            check(t.annotations.destructive_hint is destructive, f"{t.name}: {t.annotations!r}")
            check(t.annotations.read_only_hint is (t.name in ("status", "output", "grep")),
                  f"{t.name}: {t.annotations!r}")

        spawned = await client.call_tool("spawn", {"command": "echo from-a-job"})
        check(not spawned.is_error, f"spawn failed: {spawned!r}")
        job = spawned.structured_content["id"]
        status = await client.call_tool("status", {"id": job, "waitMs": 20000})
        check(status.structured_content["status"] == "exited", f"status: {status!r}")
        output = await client.call_tool("output", {"id": job})
        check(output.structured_content["content"] == "from-a-job\n", f"output: {output!r}")
        found = await client.call_tool("grep", {"id": job, "pattern": "a-j"})
        check(found.structured_content["total"] == 1, f"grep: {found!r}")
        reader = (await client.call_tool("spawn", {"command": "bash -c 'read x; echo got $x'"})).structured_content["id"]
        sent = await client.call_tool("send", {"id": reader, "text": "it", "eof": True})
        check(sent.structured_content == {"id": reader, "bytes": 3, "eof": True}, f"send: {sent!r}")
        await client.call_tool("status", {"id": reader, "waitMs": 20000})
        output = await client.call_tool("output", {"id": reader})
        check(output.structured_content["content"] == "got it\n", f"output: {output!r}")
        sleeper = (await client.call_tool("spawn", {"command": "sleep 300"})).structured_content["id"]
        killed = await client.call_tool("kill", {"id": sleeper, "signal": "KILL"})
        check(killed.structured_content["status"] == "killed", f"kill: {killed!r}")
        unknown = await client.call_tool("status", {"id": "999999"})
        check(unknown.is_error and "hint:" in unknown.content[0].text, f"unknown job: {unknown!r}")

        # Argument errors are error results the model can read, not
        # protocol errors; every one conforms to the tool's outputSchema.
        await fails("run", {}, "missing field `command`")
        await fails("run", {"command": "ls", "shell": True}, "unknown field `shell`")
        refused = await fails("spawn", {"command": "rm -rf /"}, "no job was started")
        check(refused.structured_content["result"]["denial"]["rule"] == "command.not-allowed",
              f"spawn refusal: {refused!r}")
        for tool in ("output", "kill"):
            await fails(tool, {"id": "999999"}, "hint:")
        await fails("grep", {"id": job, "pattern": "("}, "grep failed")
        await fails("send", {"id": reader}, "nothing to send")
        await fails("kill", {"id": job, "signal": "HUP"}, "unknown variant")
        return version


async def main() -> None:
    for mode in ("legacy", "auto"):
        version = await session(mode)
        print(f"ok: {mode} {version}", flush=True)


asyncio.run(main())
