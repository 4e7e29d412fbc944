/** Channel secrets at rest: one AES-GCM ciphertext per channel, bound to its row. */
import type { Keyring } from "../../shared/crypto/keyring";
import type { ChannelSecrets } from "./channel-config";

/** Where a channel's secrets live: the AES-GCM additional data. */
export const channelSecretContext = (orgId: string, channelId: string) => ({ orgId, table: "notification_channels", column: "secret", rowId: channelId });

export async function sealSecrets(keyring: Keyring, orgId: string, channelId: string, secrets: ChannelSecrets | null): Promise<string | null> {
  return secrets ? keyring.encrypt(JSON.stringify(secrets), channelSecretContext(orgId, channelId)) : null;
}

/** The channel's secrets, or null when it has none or they cannot be decrypted (fail closed). */
export async function decryptSecrets(
  keyring: Keyring,
  channel: { id: string; orgId: string; secretCiphertext: string | null },
): Promise<ChannelSecrets | null> {
  if (!channel.secretCiphertext) return null;
  try {
    return JSON.parse(await keyring.decrypt(channel.secretCiphertext, channelSecretContext(channel.orgId, channel.id))) as ChannelSecrets;
  } catch {
    return null;
  }
}
