/**
 * Refuses to start with other secret keys than the ones this database's secrets
 * were encrypted with. Without it, a restore onto a machine with a new keyring (or a
 * lost SECRET_KEYS) starts fine and fails later, secret by secret ("cannot be
 * decrypted" on a clone, a webhook, an env read). The check: `instance_facts`
 * holds a known text encrypted with the keyring; it must decrypt. Written at the
 * first start that finds none (a new database, or one from before the check),
 * and re-encrypted with the active key after a rotation, so dropping an old key
 * later keeps the check meaningful.
 */
import { eq } from "drizzle-orm";
import type { Keyring } from "../../shared/crypto/keyring";
import { instanceFacts } from "../../shared/db/schema";
import type { Db } from "../../shared/db/types";

const NAME = "keyring_check";
const TEXT = "workspace-service keyring check";
const CONTEXT = { orgId: "instance", table: "instance_facts", column: "value", rowId: NAME };

export class KeyringMismatchError extends Error {}

export async function checkKeyring(db: Db, keyring: Keyring): Promise<"created" | "ok" | "rotated"> {
  const [row] = await db.select({ value: instanceFacts.value }).from(instanceFacts).where(eq(instanceFacts.name, NAME));
  if (!row) {
    const value = await keyring.encrypt(TEXT, CONTEXT);
    // A concurrent first start may have written it: the stored one is checked next start.
    await db.insert(instanceFacts).values({ name: NAME, value }).onConflictDoNothing();
    return "created";
  }
  let plain: string | undefined;
  try {
    plain = await keyring.decrypt(row.value, CONTEXT);
  } catch {
    plain = undefined;
  }
  if (plain !== TEXT) {
    const keyId = row.value.split(".")[1] ?? "?";
    throw new KeyringMismatchError(
      `The secret keys do not match this database: its secrets were encrypted with key "${keyId}", which SECRET_KEYS ` +
        `(or DATA_DIR/secret-keys) does not hold or holds with another value. Start with the SECRET_KEYS this data was ` +
        "created (or backed up) with; a new key is added in front of the old ones (SECRET_KEYS=new:…,old:…), never instead of them.",
    );
  }
  if (row.value.split(".")[1] === keyring.activeKeyId) return "ok";
  await db
    .update(instanceFacts)
    .set({ value: await keyring.encrypt(TEXT, CONTEXT), updatedAt: new Date() })
    .where(eq(instanceFacts.name, NAME));
  return "rotated";
}
