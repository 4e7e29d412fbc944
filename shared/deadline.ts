/** A promise raced against a deadline (both runtimes): what readiness and the metrics scrape bound their database reads with. */
export class DeadlineExceeded extends Error {}

/** `work`, or a DeadlineExceeded rejection after `ms`. The work is left to finish or fail on its own; its failure is not unhandled. */
export function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineExceeded()), ms);
  });
  work.catch(() => {});
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}
