import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { identitySuite } from "../suites/identity.suite";

identitySuite(useHarness(postgresHarness));
