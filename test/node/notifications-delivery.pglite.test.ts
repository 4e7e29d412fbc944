import { useHarness } from "../support/harness";
import { pgliteHarnessWith } from "../support/node-harness";
import { nodeNotificationsEnv } from "../support/notifications-env-node";
import { notificationsDeliverySuite } from "../suites/notifications-delivery.suite";

const env = nodeNotificationsEnv(pgliteHarnessWith);
notificationsDeliverySuite(useHarness(env.harness), env);
