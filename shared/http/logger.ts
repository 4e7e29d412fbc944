/**
 * Structured one-line JSON logs, and plain lines for the person watching the
 * self-hosted server's terminal (a deployment's state changed, an app crashed).
 * Callers pass only what is safe to keep: request bodies, headers, secrets and
 * variable values are never logged.
 */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /** A plain sentence, prefixed with the time (functions/self-hosted/runner/terminal-lines.ts). */
  line(text: string): void;
}

export function jsonLogger(write: (line: string) => void = (l) => console.log(l)): Logger {
  const emit = (level: string, msg: string, fields?: Record<string, unknown>) =>
    write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }));
  return { info: (m, f) => emit("info", m, f), error: (m, f) => emit("error", m, f), line: (text) => write(`${new Date().toISOString()} ${text}`) };
}

export const silentLogger: Logger = { info() {}, error() {}, line() {} };
