/** The secrets keyring: AES-256-GCM with key ids, row-bound additional data, rotation, fail closed. */
import { describe, expect, it } from "vitest";
import { fromBase64Url, toBase64Url } from "../../shared/crypto/encoding";
import { createKeyring, generateKeySpec, parseKeySpec } from "../../shared/crypto/keyring";

const ctx = { orgId: "org_1", table: "workspace_settings", column: "clone_token", rowId: "usr_1" };

describe("keyring", () => {
  it("round-trips and never emits the plaintext", async () => {
    const keyring = await createKeyring(generateKeySpec("a"));
    const sealed = await keyring.encrypt("s3cret-value", ctx);
    expect(sealed).toMatch(/^v1\.a\./);
    expect(sealed).not.toContain("s3cret");
    expect(await keyring.decrypt(sealed, ctx)).toBe("s3cret-value");
    // A fresh IV every time.
    expect(await keyring.encrypt("s3cret-value", ctx)).not.toBe(sealed);
  });

  it("binds a ciphertext to its organization, table, column and row", async () => {
    const keyring = await createKeyring(generateKeySpec("a"));
    const sealed = await keyring.encrypt("bound", ctx);
    for (const other of [{ orgId: "org_2" }, { table: "t" }, { column: "c" }, { rowId: "usr_2" }]) {
      await expect(keyring.decrypt(sealed, { ...ctx, ...other })).rejects.toThrow("cannot be decrypted");
    }
  });

  it("fails closed on tampering, unknown keys and garbage", async () => {
    const keyring = await createKeyring(generateKeySpec("a"));
    const sealed = await keyring.encrypt("x", ctx);
    const parts = sealed.split(".");
    const flipped = parts[3]!.startsWith("A") ? `B${parts[3]!.slice(1)}` : `A${parts[3]!.slice(1)}`;
    const tooShort = [...parts.slice(0, 3), "AAAA"].join(".");
    for (const bad of [[...parts.slice(0, 3), flipped].join("."), tooShort, sealed.replace(".a.", ".zz."), "v2.a.b.c", "plain", ""]) {
      await expect(keyring.decrypt(bad, ctx)).rejects.toThrow("cannot be decrypted");
    }
  });

  it("rotates: the first key encrypts, older keys still decrypt", async () => {
    const oldSpec = generateKeySpec("k1");
    const old = await createKeyring(oldSpec);
    const legacy = await old.encrypt("legacy", ctx);
    const rotated = await createKeyring(`${generateKeySpec("k2")},${oldSpec}`);
    expect(rotated.activeKeyId).toBe("k2");
    expect(await rotated.decrypt(legacy, ctx)).toBe("legacy");
    expect(await rotated.encrypt("new", ctx)).toMatch(/^v1\.k2\./);
    // A keyring that dropped k1 can no longer read what k1 sealed.
    await expect((await createKeyring(generateKeySpec("k3"))).decrypt(legacy, ctx)).rejects.toThrow();
  });

  it("reads what WebCrypto's AES-GCM sealed (values stored before the keyring used node:crypto), and WebCrypto reads its values", async () => {
    const spec = generateKeySpec("w");
    const keyring = await createKeyring(spec);
    const key = await crypto.subtle.importKey("raw", fromBase64Url(spec.slice(2)), "AES-GCM", false, ["encrypt", "decrypt"]);
    const additionalData = new TextEncoder().encode(JSON.stringify([ctx.orgId, ctx.table, ctx.column, ctx.rowId]));
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const sealed = await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData }, key, new TextEncoder().encode("from webcrypto"));
    expect(await keyring.decrypt(`v1.w.${toBase64Url(iv)}.${toBase64Url(new Uint8Array(sealed))}`, ctx)).toBe("from webcrypto");

    const [, , ivPart, body] = (await keyring.encrypt("from the keyring", ctx)).split(".");
    const opened = await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64Url(ivPart!), additionalData }, key, fromBase64Url(body!));
    expect(new TextDecoder().decode(opened)).toBe("from the keyring");
  });

  it("rejects malformed key specs", () => {
    expect(() => parseKeySpec("")).toThrow();
    expect(() => parseKeySpec("nokey")).toThrow();
    expect(() => parseKeySpec("a:c2hvcnQ")).toThrow("32 bytes");
    expect(() => parseKeySpec(`bad id:${"A".repeat(43)}`)).toThrow();
  });
});
