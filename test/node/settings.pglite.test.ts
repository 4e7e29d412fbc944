import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { settingsSuite } from "../suites/settings.suite";

settingsSuite(useHarness(pgliteHarness));
