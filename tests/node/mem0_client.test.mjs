// The official `mem0ai` npm package's MemoryClient against a real `aril serve`: TypeScript and
// JavaScript agents use aril by changing the client's host. Run by scripts/test-clients:
//   ARIL_BIN=target/debug/aril NODE_PATH=.../node_modules node --test tests/node/mem0_client.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

import MemoryClient from "mem0ai";

const aril = process.env.ARIL_BIN ?? "target/debug/aril";
const data = mkdtempSync(join(tmpdir(), "aril-node-"));
const key = (...args) =>
  execFileSync(aril, ["--data-dir", data, "keys", "create", ...args], { encoding: "utf8" }).trim();
let server;
let host;
let keys;

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.on("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

before(async () => {
  keys = { alice: key("--user", "alice"), bob: key("--user", "bob") };
  const port = await freePort();
  server = spawn(aril, ["--data-dir", data, "serve", "--bind", `127.0.0.1:${port}`], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const first = await new Promise((resolve) =>
    createInterface({ input: server.stdout }).once("line", resolve),
  );
  assert.match(first, /serving on/);
  host = `http://127.0.0.1:${port}`;
});

after(() => server?.kill("SIGTERM"));

test("add, search, getAll, get, update, history, delete and deleteAll", async () => {
  const alice = new MemoryClient({ apiKey: keys.alice, host });
  const added = await alice.add(
    [
      { role: "user", content: "I'm vegetarian and allergic to peanuts." },
      { role: "assistant", content: "Noted: no meat, no peanuts." },
    ],
    { user_id: "alice", metadata: { source: "node" } },
  );
  assert.equal(added.results.length, 2, JSON.stringify(added));
  const id = added.results[0].id;
  await alice.add("I moved to Porto last spring.", { user_id: "alice" });

  const found = await alice.search("What can't she eat?", { filters: { user_id: "alice" }, top_k: 3 });
  assert.ok(found.results.some((r) => r.memory.includes("peanuts")), JSON.stringify(found));
  assert.ok(found.results.every((r) => typeof r.score === "number"));

  const all = await alice.getAll({ filters: { user_id: "alice" }, page: 1, pageSize: 2 });
  assert.equal(all.count, 3);
  assert.equal(all.results.length, 2);

  const one = await alice.get(id);
  assert.ok(one.memory.startsWith("I'm vegetarian"));
  assert.deepEqual(one.metadata, { source: "node" });

  const updated = await alice.update(id, { text: "I'm vegan now, still allergic to peanuts." });
  assert.equal(updated.id, id);
  assert.ok((await alice.get(id)).memory.startsWith("I'm vegan"));
  const history = await alice.history(id);
  assert.deepEqual(history.map((h) => h.event), ["ADD", "UPDATE"]);

  await alice.delete(id);
  await assert.rejects(alice.get(id));
  await alice.deleteAll({ user_id: "alice" });
  assert.equal((await alice.getAll({ filters: { user_id: "alice" } })).count, 0);
});

test("a user key never reaches another user's memory", async () => {
  const alice = new MemoryClient({ apiKey: keys.alice, host });
  const bob = new MemoryClient({ apiKey: keys.bob, host });
  const secret = (await alice.add("My locker code is 3141.", { user_id: "alice" })).results[0].id;
  await assert.rejects(bob.get(secret));
  await assert.rejects(bob.search("locker code", { filters: { user_id: "alice" } }));
  const own = await bob.search("locker code", { filters: { user_id: "bob" } });
  assert.equal(own.results.length, 0);
});
