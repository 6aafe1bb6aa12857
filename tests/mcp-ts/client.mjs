// Drives `agent-rsh mcp` with an official MCP TypeScript SDK client, as an
// agent would, with output-schema validation on.
//
// Usage: node client.mjs v1|v2 AGENT_RSH_BINARY POLICY_FILE
//
// v1 is @modelcontextprotocol/sdk 1.x, whose callTool checks every
// structuredContent against the tool's outputSchema (error results
// included); v2 is @modelcontextprotocol/client 2.x (the 2025-11-25
// handshake, then 2026-07-28 with mode "auto"). Besides the SDK's own
// checks, every result, error or not, is validated here with Ajv as the
// SDK configures it. Lists the tools and calls every tool, its error paths
// included. Prints "ok: <flavor> <mode> <protocol version>" per session;
// any failed check exits non-zero.

import Ajv from "ajv";

const [flavor, BINARY, POLICY] = process.argv.slice(2);
const v1 = flavor === "v1";
const { Client } = v1
  ? await import("@modelcontextprotocol/sdk/client/index.js")
  : await import("@modelcontextprotocol/client");
const { StdioClientTransport } = v1
  ? await import("@modelcontextprotocol/sdk/client/stdio.js")
  : await import("@modelcontextprotocol/client/stdio");

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const ajv = new Ajv({ strict: false, allErrors: true });

async function session(mode) {
  const transport = new StdioClientTransport({
    command: BINARY,
    args: ["mcp", "--policy", POLICY],
    stderr: "inherit",
  });
  const options = v1 ? {} : { versionNegotiation: { mode } };
  const client = new Client({ name: "agent-rsh-test", version: "1.0.0" }, options);
  await client.connect(transport);
  const version = client.getNegotiatedProtocolVersion?.() ?? "(initialize)";

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  check(
    JSON.stringify(names) === JSON.stringify(["run", "spawn", "status", "output", "grep", "send", "kill"]),
    `tools: ${names}`,
  );
  const validators = {};
  for (const t of tools) {
    check(t.outputSchema, `${t.name} has no outputSchema`);
    check(t.inputSchema.type === "object", `${t.name} inputSchema`);
    validators[t.name] = ajv.compile(t.outputSchema);
  }

  let calls = 0;
  async function call(name, args, options = {}) {
    const r = await client.callTool({ name, arguments: args }, ...(v1 ? [undefined, options] : [options]));
    calls++;
    check(r.structuredContent !== undefined, `${name}: no structuredContent: ${JSON.stringify(r)}`);
    const valid = validators[name](r.structuredContent);
    check(valid, `${name} ${JSON.stringify(args)}: structuredContent does not conform: ${ajv.errorsText(validators[name].errors)}\n${JSON.stringify(r.structuredContent)}`);
    check(r.content[0].type === "text", `${name}: content ${JSON.stringify(r.content)}`);
    return { ...r, text: r.content[0].text };
  }
  async function fails(name, args, needle) {
    const r = await call(name, args);
    check(r.isError === true, `${name} ${JSON.stringify(args)} was not an error: ${r.text}`);
    check(r.text.includes(needle), `${name} ${JSON.stringify(args)}: ${JSON.stringify(r.text)} lacks ${JSON.stringify(needle)}`);
    return r;
  }

  // run: success, refusal, argument errors, progress.
  const ok = await call("run", { command: "echo hi" });
  check(!ok.isError && ok.structuredContent.stdout === "hi\n", `echo: ${ok.text}`);
  const denied = await fails("run", { command: "rm -rf /" }, "command.not-allowed");
  check(denied.text.includes("hint:"), denied.text);
  check(denied.structuredContent.denial.rule === "command.not-allowed", JSON.stringify(denied.structuredContent));
  await fails("run", {}, "missing field `command`");
  await fails("run", { command: "ls", shell: true }, "unknown field `shell`");
  await fails("run", { command: "ls", timeoutMs: 0 }, "timeoutMs must be at least 1");
  await fails("run", { command: "bash -c 'exit 3'" }, "exit code 3");
  const seen = [];
  // The last sleep: the SDK handles a progress notification in a later
  // microtask but a response at once, so progress that arrives in the same
  // read as the response is dropped by the client (under load, it does).
  const printed = await call(
    "run",
    { command: "bash -c 'echo one; sleep 0.3; echo two; sleep 0.5'" },
    { onprogress: (p) => seen.push(p), timeout: 20000, resetTimeoutOnProgress: true },
  );
  check(!printed.isError, printed.text);
  const messages = seen.map((p) => p.message ?? "").join("");
  check(messages.includes("one") && messages.includes("two"), `progress: ${JSON.stringify(seen)}; result: ${JSON.stringify(printed.structuredContent)}`);

  // The job tools, then each one's error paths.
  const spawned = await call("spawn", { command: "echo from-a-job" });
  check(!spawned.isError, spawned.text);
  const id = spawned.structuredContent.id;
  const st = await call("status", { id, waitMs: 20000 });
  check(st.structuredContent.status === "exited", st.text);
  const out = await call("output", { id });
  check(out.structuredContent.content === "from-a-job\n", out.text);
  const found = await call("grep", { id, pattern: "a-j" });
  check(found.structuredContent.total === 1, found.text);
  const reader = (await call("spawn", { command: "bash -c 'read x; echo got $x'" })).structuredContent.id;
  const sent = await call("send", { id: reader, text: "it", eof: true });
  check(sent.structuredContent.bytes === 3, sent.text);
  await call("status", { id: reader, waitMs: 20000 });
  const sleeper = (await call("spawn", { command: "sleep 300" })).structuredContent.id;
  const killed = await call("kill", { id: sleeper, signal: "KILL" });
  check(killed.structuredContent.status === "killed", killed.text);

  const spawnDenied = await fails("spawn", { command: "rm -rf /" }, "no job was started");
  check(spawnDenied.structuredContent.result.denial.rule === "command.not-allowed", spawnDenied.text);
  await fails("spawn", { command: "echo", timeoutMs: "soon" }, "invalid type");
  for (const tool of ["status", "output", "kill"]) {
    await fails(tool, { id: "999999" }, "hint: a job id is the `id` that spawn returned");
  }
  await fails("grep", { id: "999999", pattern: "x" }, "hint:");
  await fails("send", { id: "999999", text: "x" }, "hint:");
  await fails("grep", { id, pattern: "(" }, "grep failed");
  await fails("grep", { id }, "missing field `pattern`");
  await fails("send", { id: reader }, "nothing to send");
  await fails("kill", { id, signal: "HUP" }, "unknown variant `HUP`");
  await fails("output", { id, colour: true }, "unknown field `colour`");
  await fails("status", {}, "missing field `id`");

  await client.close();
  return [version, calls];
}

const modes = v1 ? ["legacy"] : ["legacy", "auto"];
for (const mode of modes) {
  const [version, calls] = await session(mode);
  console.log(`ok: ${flavor} ${mode} ${version} (${calls} calls validated)`);
}
