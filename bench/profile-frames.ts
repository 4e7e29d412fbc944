/**
 * The top frames of a CPU profile taken in a benchmark's server process, by self time: what
 * `npm run bench` prints for the real route (issue 25), from node:inspector's profiler started
 * and stopped over the bench's IPC channel around a load of that route alone.
 */
import { Session } from "node:inspector/promises";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface Frame {
  /** `function file:line`, the file shortened to its last two path segments. */
  frame: string;
  /** Share of the busy samples (idle left out), 0-1. */
  share: number;
  /** Self time, in milliseconds. */
  ms: number;
}

/** Self time per frame, busiest first; `(idle)` is left out so the shares are of the time the process worked. */
export function topFrames(profile: Profile, count: number): Frame[] {
  const byNode = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) byNode.set(profile.samples[i]!, (byNode.get(profile.samples[i]!) ?? 0) + (profile.timeDeltas[i] ?? 0));
  const byFrame = new Map<string, number>();
  let busy = 0;
  for (const node of profile.nodes) {
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === "(idle)") continue;
    const time = byNode.get(node.id) ?? 0;
    busy += time;
    const key = `${functionName || "(anonymous)"} ${url ? `${url.split("/").slice(-2).join("/")}:${lineNumber + 1}` : ""}`.trim();
    byFrame.set(key, (byFrame.get(key) ?? 0) + time);
  }
  return [...byFrame]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([frame, time]) => ({ frame, share: busy > 0 ? time / busy : 0, ms: time / 1000 }));
}

/**
 * The frames on which `a` spends more per request than `b` (µs per request, self time), most first: where
 * the real route's extra cost over the bare one goes. `a`/`b`: every frame of each profile (count Infinity).
 */
export function extraFrames(a: Frame[], aRequests: number, b: Frame[], bRequests: number, count: number): Array<{ frame: string; a: number; b: number }> {
  const perRequest = (frames: Frame[], requests: number) => new Map(frames.map((f) => [f.frame, (f.ms * 1000) / Math.max(1, requests)]));
  const pa = perRequest(a, aRequests);
  const pb = perRequest(b, bRequests);
  return [...new Set([...pa.keys(), ...pb.keys()])]
    .map((frame) => ({ frame, a: pa.get(frame) ?? 0, b: pb.get(frame) ?? 0 }))
    .sort((x, y) => y.a - y.b - (x.a - x.b))
    .slice(0, count);
}

/** Starts the profiler in this process; the returned function stops it and answers the top frames. */
export async function startProfile(): Promise<(count: number) => Promise<Frame[]>> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.start");
  return async (count) => {
    const { profile } = (await session.post("Profiler.stop")) as unknown as { profile: Profile };
    session.disconnect();
    return topFrames(profile, count);
  };
}
