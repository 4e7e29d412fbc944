import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { docsSuite } from "../suites/docs.suite";

docsSuite(useHarness(postgresHarness));
