/**
 * `npm run db:setup`: the cloud's deploy step against DATABASE_URL (Neon accepts
 * ordinary Postgres connections). Applies migrations/, and on an empty database
 * creates the first owner, organization and token, printed once. The Node
 * adapter does both by itself at start.
 */
import { migrationsLine } from "../shared/db/migration-level";
import { openPostgres } from "../shared/db/postgres";
import { EmailSchema } from "./auth/login";
import { bootstrapOwner, DEFAULT_OWNER_EMAIL } from "./identity/store";

const url = process.env.DATABASE_URL;
if (!url) {
  console.error("DATABASE_URL is required");
  process.exit(1);
}
const ownerToken = process.env.WORKSPACE_OWNER_TOKEN;
if (ownerToken !== undefined && ownerToken.length < 32) {
  console.error("WORKSPACE_OWNER_TOKEN must be at least 32 characters");
  process.exit(1);
}
// The first owner's address (the one to ask a sign-in code for); default DEFAULT_OWNER_EMAIL.
const ownerEmail = process.env.WORKSPACE_OWNER_EMAIL || undefined;
if (ownerEmail !== undefined && !EmailSchema.safeParse(ownerEmail).success) {
  console.error("WORKSPACE_OWNER_EMAIL must be an e-mail address, e.g. you@example.com");
  process.exit(1);
}
// A database migrated by a newer version is refused with a message naming both levels.
const database = await openPostgres(url, { max: 1 }).catch((e: Error) => {
  console.error(e.message);
  process.exit(1);
});
try {
  console.log(migrationsLine(database.migrated));
  const boot = await bootstrapOwner(database.db, { token: ownerToken, email: ownerEmail?.toLowerCase() });
  if (boot) {
    console.log(`created the owner user ${ownerEmail?.toLowerCase() ?? DEFAULT_OWNER_EMAIL} and organization ${boot.orgId}`);
    if (!ownerToken) console.log(`owner token (shown once):\n  ${boot.token}`);
  }
} finally {
  await database.close();
}
