/** A fixed keyring for tests (never used outside them): the active key first, an old one second. */
export const TEST_SECRET_KEYS = "t2:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8,t1:HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4";
