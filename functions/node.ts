/** Self-hosted entry (`npm start`): the shared routers on Node, PGlite by default. */
import { loadNodeConfig } from "./self-hosted/config";
import { DataDirLockedError } from "./self-hosted/data-dir";
import { startSelfHosted } from "./self-hosted/start";

try {
  const server = await startSelfHosted(loadNodeConfig(process.env));
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      console.log(`${signal}: shutting down`);
      server.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  }
} catch (e) {
  if (e instanceof DataDirLockedError) console.error(e.message);
  else console.error(e instanceof Error ? e.message : e);
  process.exit(1);
}
