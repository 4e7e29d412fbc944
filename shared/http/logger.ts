/**
 * Structured one-line JSON logs. Callers pass only what is safe to keep: request
 * bodies, headers and secrets are never logged.
 */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export function jsonLogger(write: (line: string) => void = (l) => console.log(l)): Logger {
  const emit = (level: string, msg: string, fields?: Record<string, unknown>) =>
    write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }));
  return { info: (m, f) => emit("info", m, f), error: (m, f) => emit("error", m, f) };
}

export const silentLogger: Logger = { info() {}, error() {} };
