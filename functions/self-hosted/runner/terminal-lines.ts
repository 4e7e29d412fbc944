/**
 * One plain line on the server's terminal per thing an operator watching it
 * wants to know: a deployment changed state (building, deploying, ready, failed,
 * back in the queue), an app crashed and restarts, came back, was given up
 * (crash loop), went to sleep or woke. Request lines are off by default
 * (LOG_REQUESTS), so these are what the terminal shows while the server works.
 *
 * A decorator around the runner's control plane: every such change goes through
 * one of its writes, whatever the transport, so the runner's core needs no
 * printing of its own. A line is printed only when the write took effect (a
 * write that no longer holds answers undefined and says nothing).
 *
 * Lines carry ids, states and ports only: never a failure reason (it may quote
 * a build's output), a variable, a token or a command.
 */
import type { Logger } from "../../../shared/http/logger";
import type { RunnerControl, RunnerDeployment } from "./control";

const of = (d: Pick<RunnerDeployment, "id" | "projectId">) => `deployment ${d.id} (project ${d.projectId})`;

export function withTerminalLines(control: RunnerControl, logger: Pick<Logger, "line">): RunnerControl {
  const say = (text: string) => logger.line(text);
  // Apps down after a crash, and asleep: their next port is "up again" / "awake".
  const down = new Set<string>();
  const asleep = new Set<string>();
  return {
    ...control,
    async claim() {
      const d = await control.claim();
      if (d) say(`${of(d)}: building`);
      return d;
    },
    async advance(id, from, to, failureReason) {
      const d = await control.advance(id, from, to, failureReason);
      if (d) say(to === "failed" ? `${of(d)}: failed (its logs say why)` : `${of(d)}: ${to}`);
      return d;
    },
    async markReady(id) {
      const d = await control.markReady(id);
      say(`${of(d)}: ready, now its environment's live deployment`);
      return d;
    },
    async release(id) {
      await control.release(id);
      say(`deployment ${id}: back in the queue (this runner stopped before finishing it)`);
    },
    async setServing(id, port) {
      await control.setServing(id, port);
      if (down.delete(id)) say(`deployment ${id}: app up again on port ${port}`);
      else if (asleep.delete(id)) say(`deployment ${id}: awake, app running on port ${port}`);
      else say(`deployment ${id}: app running on port ${port}`);
    },
    async recordDown(id) {
      await control.recordDown(id);
      down.add(id);
      say(`deployment ${id}: app crashed, restarting it`);
    },
    async setCrashed(id) {
      const d = await control.setCrashed(id);
      down.delete(id);
      if (d) say(`${of(d)}: app given up (it crashed too often, went over its disk limit or could not be started); it no longer serves`);
      return d;
    },
    async setAsleep(id, cutoff) {
      const d = await control.setAsleep(id, cutoff);
      if (d) {
        asleep.add(id);
        say(`${of(d)}: asleep (no request for SLEEP_AFTER); the next request wakes it`);
      }
      return d;
    },
    async wakeAlwaysOn() {
      const n = await control.wakeAlwaysOn();
      if (n > 0) say(`${n} sleeping deployment${n === 1 ? "" : "s"} woke: their project is always on now`);
      return n;
    },
  };
}
