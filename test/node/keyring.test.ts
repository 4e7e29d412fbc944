import { keyringSuite } from "../suites/keyring.suite";

keyringSuite();
