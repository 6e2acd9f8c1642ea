# The recovery service (services/recovery.h): what an orphan reports once it has
# been adopted. Carried in Message's `service` envelope with id 5 and a kind below. The adoption handshake itself (Hello with `adopt`, Adopted) and the
# reports that keep every process's live tree current are the node core's
# (canopy.capnp).
@0x87a607d27ae841f2;

$import "/capnp/c++.capnp".namespace("canopy::wire::recovery");

const serviceId :UInt16 = 5;

enum Kind {
  recovered @0;                  # body: Recovered
}

struct Recovered {
  # Orphan -> front-end (up the tree): the orphan has been adopted and has
  # compensated its lost state. Times in microseconds.
  orphan @0 :UInt32;
  adopter @1 :UInt32;
  failedParent @2 :UInt32;
  incarnation @3 :UInt32;
  chooseUs @4 :UInt64;           # computing the list of potential adopters
  connectUs @5 :UInt64;          # from the parent's loss to acceptance by the adopter
  compensateUs @6 :UInt64;       # sending filter states and held-back output
  cleanupUs @7 :UInt64;          # updating local tables and sending reports
  attempts @8 :UInt32;           # adopters tried
  incompleteStreams @9 :List(UInt32);  # streams whose filters are not state recoverable
  standby @10 :Bool;             # adopted over its standby link (no new connection)
}
