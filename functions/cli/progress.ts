/** Human sizes, and an upload progress bar for a terminal (one line per 10% when the output is not a terminal). */
const WIDTH = 30;
const UNITS = ["KB", "MB", "GB", "TB"];

/**
 * A size a person reads: "512 B", "12 KB", "1.4 MB", "300 MB" (1 KB = 1024 bytes,
 * as the upload limit is counted): one decimal below 10, none from 10 on; never "0.0".
 */
export function humanSize(bytes: number): string {
  if (bytes < 1024) return `${Math.max(0, Math.round(bytes))} B`;
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  // 9.96 KB rounds to "10 KB", not "10.0 KB"; 1023.9 KB shows as "1.0 MB".
  if (value >= 1023.5 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  const text = value < 9.95 ? value.toFixed(1).replace(/\.0$/, "") : String(Math.round(value));
  return `${text} ${UNITS[unit]}`;
}

export interface Progress {
  update(sent: number): void;
  done(): void;
}

export function progressBar(total: number, write: (text: string) => void, tty: boolean, label = "Uploading"): Progress {
  const started = Date.now();
  let lastDecile = -1;
  let lastDraw = 0;
  const line = (sent: number) => {
    const ratio = total > 0 ? Math.min(1, sent / total) : 1;
    const filled = Math.round(ratio * WIDTH);
    const seconds = Math.max(0.001, (Date.now() - started) / 1000);
    return `${label} [${"#".repeat(filled)}${"-".repeat(WIDTH - filled)}] ${String(Math.floor(ratio * 100)).padStart(3)}%  ${humanSize(sent)}/${humanSize(total)}  ${humanSize(sent / seconds)}/s`;
  };
  return {
    update(sent) {
      if (tty) {
        const now = Date.now();
        if (now - lastDraw < 100 && sent < total) return;
        lastDraw = now;
        write(`\r${line(sent)}\u001b[K`);
        return;
      }
      const decile = Math.floor((total > 0 ? sent / total : 1) * 10);
      if (decile !== lastDecile) {
        lastDecile = decile;
        write(`${line(sent)}\n`);
      }
    },
    done() {
      if (tty) write("\n");
    },
  };
}
