/**
 * `npm run bench:all`: runs every benchmark one after another (never two at once:
 * each measures against its floor on the same 2 cores) and writes the figures they
 * report (their `bench-result` lines, bench/common.ts report) to bench/RESULTS.md
 * as one Markdown table: measure, figure, floor, ratio, target, met. The figures
 * travel with the code; targets are judged here, never asserted in tests.
 *
 * BENCH_ONLY=<names> runs only those (e.g. `settings,edge`); the other BENCH_*
 * settings reach each benchmark as they are. A benchmark that fails is listed with
 * its exit code and the run goes on; the exit code is then 1.
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { type BenchResult, RESULT_MARKER } from "./common";

/** Every benchmark script, in the order they run (cheap ones first). */
const BENCHMARKS = ["settings", "start", "git-ls-remote", "upload", "notifications-fanout", "log-ingest", "console", "edge", "deploy", "runners", "newcomer"];

const only = process.env.BENCH_ONLY?.split(",")
  .map((s) => s.trim())
  .filter(Boolean);
if (only) {
  const unknown = only.filter((name) => !BENCHMARKS.includes(name));
  if (unknown.length > 0) throw new Error(`BENCH_ONLY names no benchmark: ${unknown.join(", ")} (known: ${BENCHMARKS.join(", ")})`);
}

function run(name: string): Promise<{ results: BenchResult[]; code: number | null; seconds: number }> {
  const started = performance.now();
  const child = spawn(process.execPath, ["--import", "tsx", join(import.meta.dirname, `${name}.ts`)], { stdio: ["ignore", "pipe", "inherit"] });
  const results: BenchResult[] = [];
  let pending = "";
  child.stdout.on("data", (chunk: Buffer) => {
    process.stdout.write(chunk);
    pending += chunk.toString();
    const lines = pending.split("\n");
    pending = lines.pop()!;
    for (const line of lines) if (line.startsWith(RESULT_MARKER)) results.push(JSON.parse(line.slice(RESULT_MARKER.length)) as BenchResult);
  });
  return new Promise((resolve) => child.on("close", (code) => resolve({ results, code, seconds: (performance.now() - started) / 1000 })));
}

const cell = (s: string) => s.replaceAll("|", "\\|").replaceAll("\n", " ");

async function main() {
  const rows: string[] = [];
  const failed: string[] = [];
  const before = loadavg()[0]!;
  for (const name of BENCHMARKS.filter((n) => !only || only.includes(n))) {
    console.log(`\n== bench/${name}.ts`);
    const { results, code, seconds } = await run(name);
    if (code !== 0) failed.push(`${name} (exit ${code})`);
    for (const r of results) {
      rows.push(
        `| ${cell(r.measure)} | ${cell(r.figure)} | ${cell(r.floor ?? "—")} | ${r.ratio === null ? "—" : `${r.ratio.toFixed(2)}x`} | ${cell(r.target)} | ${r.met ? "yes" : "**no**"} | ${name} |`,
      );
    }
    console.log(`== bench/${name}.ts: ${results.length} figures in ${seconds.toFixed(0)} s${code !== 0 ? `, exit ${code}` : ""}`);
  }
  // The run's BENCH_* settings (not the database URL, which may carry a password), so the table says how it was measured.
  const tuning = Object.entries(process.env)
    .filter(([name]) => name.startsWith("BENCH_") && !name.endsWith("_URL"))
    .map(([name, value]) => `\`${name}=${value}\``)
    .join(", ");
  const machine = `${cpus().length} cores (${cpus()[0]?.model.trim() ?? "unknown"}), Node ${process.version}, load average ${before.toFixed(2)} at the start and ${loadavg()[0]!.toFixed(2)} at the end`;
  const text = [
    "# Benchmark results",
    "",
    `Written by \`npm run bench:all\` (bench/all.ts) on ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC: ${machine}.`,
    "Each figure is measured against its floor in the same run; see each script's header for what it does.",
    ...(tuning ? [`Settings other than the scripts' defaults: ${tuning}.`] : []),
    ...(failed.length > 0 ? ["", `Failed: ${failed.join(", ")}.`] : []),
    "",
    "| Measure | Figure | Floor | Ratio | Target | Met | Script |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
    "",
  ].join("\n");
  writeFileSync(join(import.meta.dirname, "RESULTS.md"), text);
  console.log(`\nbench/RESULTS.md: ${rows.length} figures${failed.length > 0 ? `; failed: ${failed.join(", ")}` : ""}`);
  if (failed.length > 0) process.exitCode = 1;
}

await main();
