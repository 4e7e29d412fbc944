import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { notificationsSuite } from "../suites/notifications.suite";

notificationsSuite(useHarness(pgliteHarness));
