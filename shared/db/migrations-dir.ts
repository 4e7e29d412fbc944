import { fileURLToPath } from "node:url";

/** Absolute path of the repository's `migrations/` folder (Node only). */
export const MIGRATIONS_DIR = fileURLToPath(new URL("../../migrations", import.meta.url));
