/** The part of autocannon@9's programmatic API the benchmark uses (the package ships no types). */
declare module "autocannon" {
  export interface Options {
    url: string;
    method?: string;
    headers?: Record<string, string>;
    connections?: number;
    pipelining?: number;
    /** Seconds. */
    duration?: number;
    /** Seconds before a request counts as timed out. */
    timeout?: number;
    title?: string;
  }

  export interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
  }

  export interface Result {
    title?: string;
    url: string;
    connections: number;
    /** Seconds. */
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    resets: number;
    "2xx": number;
    /** Milliseconds. */
    latency: Histogram & { totalCount: number };
    /** Completed requests per one-second sample. */
    requests: Histogram & { sent: number };
    throughput: Histogram;
  }

  export interface Instance extends PromiseLike<Result> {
    stop(): void;
  }

  function autocannon(opts: Options): Instance;
  export default autocannon;
}
