import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { identitySuite } from "../suites/identity.suite";

identitySuite(useHarness(pgliteHarness));
