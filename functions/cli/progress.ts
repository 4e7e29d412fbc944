/** An upload progress bar for a terminal; one line per 10% when the output is not a terminal. */
const WIDTH = 30;
const mb = (n: number) => (n / 1_000_000).toFixed(1);

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
    return `${label} [${"#".repeat(filled)}${"-".repeat(WIDTH - filled)}] ${String(Math.floor(ratio * 100)).padStart(3)}%  ${mb(sent)}/${mb(total)} MB  ${mb(sent / seconds)} MB/s`;
  };
  return {
    update(sent) {
      if (tty) {
        const now = Date.now();
        if (now - lastDraw < 100 && sent < total) return;
        lastDraw = now;
        write(`\r${line(sent)}`);
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
